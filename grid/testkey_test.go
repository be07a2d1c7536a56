package grid

// testSecret turns a test's short name for a key ("k", "test cluster")
// into a secret long and varied enough for NewKey: the same name gives
// the same key, different names different keys.
func testSecret(name string) string {
	return "esgrid test key 0123456789 " + name
}
