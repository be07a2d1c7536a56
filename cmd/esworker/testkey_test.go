package main

// testSecret is the cluster key of the package's tests: a key must carry
// 128 bits (grid.CheckKey), so "k" will not do.
const testSecret = "esgrid esworker test key 0123456789"
