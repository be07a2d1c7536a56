package main

// testSecret is a cluster key for the package's tests: a key must carry
// 128 bits (grid.CheckKey), so "k" will not do.
const testSecret = "esgrid esrun test key 0123456789"
