module github.com/esgrid/esgrid

go 1.26

require (
	// Builds dashboards/esgrid.json (internal/dashboard, go generate);
	// imported by no command, so in no binary. No dependencies of its own.
	github.com/grafana/grafana-foundation-sdk/go v0.0.22
	github.com/hashicorp/memberlist v0.7.0
	// Metrics on a registry of our own (package metrics); the version
	// hashicorp/go-metrics already brings in.
	github.com/prometheus/client_golang v1.24.1
	github.com/prometheus/client_model v0.6.3
	// Pinned: in v5.3.6 a hostile map or array header (dd ff ff ff ff)
	// allocates ~170 KB; v5.4.x preallocates from the header and a 5-byte
	// frame costs gigabytes. Re-measure (grid.TestHostileFramesAllocateLittle) before
	// upgrading.
	github.com/vmihailenco/msgpack/v5 v5.3.6
	// A thread's CPU time (clock_gettime), for -slowdown; already in the
	// build through memberlist.
	golang.org/x/sys v0.47.0
	gonum.org/v1/gonum v0.17.0
	gonum.org/v1/plot v0.17.0
)

require (
	codeberg.org/go-fonts/liberation v0.5.0 // indirect
	codeberg.org/go-latex/latex v0.2.0 // indirect
	codeberg.org/go-pdf/fpdf v0.11.1 // indirect
	git.sr.ht/~sbinet/gg v0.7.0 // indirect
	github.com/ajstarks/svgo v0.0.0-20211024235047-1546f124cd8b // indirect
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/golang/freetype v0.0.0-20170609003504-e2365dfdc4a0 // indirect
	github.com/google/btree v1.1.3 // indirect
	github.com/hashicorp/errwrap v1.1.0 // indirect
	github.com/hashicorp/go-immutable-radix v1.3.1 // indirect
	github.com/hashicorp/go-metrics v0.7.0 // indirect
	github.com/hashicorp/go-msgpack/v2 v2.1.5 // indirect
	github.com/hashicorp/go-multierror v1.1.1 // indirect
	github.com/hashicorp/go-sockaddr v1.0.7 // indirect
	github.com/hashicorp/golang-lru v1.0.2 // indirect
	github.com/miekg/dns v1.1.73 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/common v0.71.0 // indirect
	github.com/prometheus/procfs v0.21.1 // indirect
	github.com/sean-/seed v0.0.0-20170313163322-e2103e2c3529 // indirect
	github.com/vmihailenco/tagparser/v2 v2.0.0 // indirect
	golang.org/x/image v0.30.0 // indirect
	golang.org/x/net v0.58.0 // indirect
	golang.org/x/text v0.41.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
