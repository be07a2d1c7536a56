package worker

// testSecret is the cluster key of the package's tests: a key must carry
// 128 bits (grid.CheckKey), so "k" will not do.
const testSecret = "esgrid worker test key 0123456789"
