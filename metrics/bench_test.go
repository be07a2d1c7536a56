package metrics

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// BenchmarkScrape is the CPU one scrape of a master's registry costs (the
// Go runtime and process collectors included, one worker), the cost that
// metrics add besides a few atomic operations per generation.
func BenchmarkScrape(b *testing.B) {
	h := promhttp.HandlerFor(exercised(&testing.T{}), promhttp.HandlerOpts{})
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
}

// BenchmarkGeneration is the cost of one generation's figures.
func BenchmarkGeneration(b *testing.B) {
	m := NewMaster(nil)
	b.ReportAllocs()
	for b.Loop() {
		m.Generation(genSample)
	}
}
