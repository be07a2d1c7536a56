// Package cputime tells the CPU time the calling OS thread has used: what
// a computation cost, however many other processes share the cores (a
// worker's -slowdown, the policies' cost per event).
package cputime
