// Package strictjson refuses what encoding/json takes silently in a file
// that people write: an object with the same key twice. encoding/json
// keeps the last value, so {"slots": 2, "slots": 40000} configured 40000
// slots without a word, and a second "plugins" replaced the first list.
package strictjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// maxDepth bounds the nesting walked: deeper than any file of ours, and
// a bound on the stack a hostile file can ask for.
const maxDepth = 64

// DuplicateKeys says where data, a JSON document, has an object with a
// key given twice ("key \"slots\" given twice, in workers[2]"), or nil. A
// document that does not decode is left for the decoder to refuse.
func DuplicateKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	type level struct {
		keys   map[string]bool // nil: an array
		name   string          // how the value is reached: workers[2]
		index  int             // an array's next element
		expect bool            // an object's next token is a key
	}
	var stack []*level
	path := func() string {
		var b strings.Builder
		for _, l := range stack {
			b.WriteString(l.name)
		}
		return strings.TrimPrefix(b.String(), ".")
	}
	// child is the name of the value about to start in the innermost
	// container.
	child := func(key string) string {
		if len(stack) == 0 {
			return ""
		}
		if top := stack[len(stack)-1]; top.keys == nil {
			top.index++
			return fmt.Sprintf("[%d]", top.index-1)
		}
		return "." + key
	}
	key := ""
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // the end, or not JSON: the decoder says which
		}
		if len(stack) > 0 {
			if top := stack[len(stack)-1]; top.keys != nil && top.expect {
				if s, ok := tok.(string); ok {
					if top.keys[s] {
						where := path()
						if where == "" {
							return fmt.Errorf("key %q given twice", s)
						}
						return fmt.Errorf("key %q given twice, in %s", s, where)
					}
					top.keys[s] = true
					key = s
					top.expect = false
					continue
				}
			}
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if len(stack) == maxDepth {
				return fmt.Errorf("nested deeper than %d", maxDepth)
			}
			l := &level{name: child(key), expect: tok == json.Delim('{')}
			if tok == json.Delim('{') {
				l.keys = map[string]bool{}
			}
			stack = append(stack, l)
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			if len(stack) > 0 && stack[len(stack)-1].keys != nil {
				stack[len(stack)-1].expect = true
			}
		default: // a scalar value
			if len(stack) > 0 {
				if top := stack[len(stack)-1]; top.keys == nil {
					top.index++
				} else {
					top.expect = true
				}
			}
		}
	}
}
