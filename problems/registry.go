package problems

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Factory builds a problem of the given dimension, or says why it cannot.
type Factory func(dim int) (Problem, error)

var (
	registryMu sync.RWMutex
	registry   = map[string]Factory{}
)

// Register makes a problem available by name, in the manner of
// database/sql drivers. It panics if name is empty, factory is nil or the
// name is taken: all three are programming errors found at start-up.
func Register(name string, factory Factory) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if name == "" || factory == nil {
		panic("problems: Register with an empty name or a nil factory")
	}
	if _, dup := registry[name]; dup {
		panic("problems: Register called twice for " + name)
	}
	registry[name] = factory
}

// New builds the problem registered as name with dimension dim.
func New(name string, dim int) (Problem, error) {
	registryMu.RLock()
	factory, ok := registry[name]
	registryMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("problems: unknown problem %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	p, err := factory(dim)
	if err != nil {
		return nil, fmt.Errorf("problems: %s: %w", name, err)
	}
	return p, nil
}

// Names returns the registered names, sorted.
func Names() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	names := make([]string, 0, len(registry))
	for name := range registry {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
