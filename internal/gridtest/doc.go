// Package gridtest holds tests that run the grid end to end in one
// process: a master, gossip, and real worker agents over loopback TCP. It
// has no code of its own; it exists because package grid cannot import
// package worker (worker imports grid).
package gridtest
