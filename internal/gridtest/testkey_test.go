package gridtest

// testSecret is the cluster key of the in-process clusters: a key must
// carry 128 bits (grid.CheckKey).
const testSecret = "esgrid gridtest key 0123456789"
