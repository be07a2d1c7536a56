package main

import (
	"flag"
	"slices"
	"strconv"
	"strings"

	"github.com/esgrid/esgrid/grid"
	"github.com/esgrid/esgrid/problems/plugin"
	"github.com/esgrid/esgrid/worker"
)

// applyConfig merges the -config file (if any) under the flags given on
// the command line, and checks the plugin list: -plugin entries are added
// to the file's, replacing a file entry of the same name. It fills
// o.catalog.
func (o *options) applyConfig(fs *flag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var entries []plugin.Entry
	if o.config != "" {
		c, err := worker.LoadFileConfig(o.config)
		if err != nil {
			return usagef("-config: %v", err)
		}
		take := func(flagName string, dst *string, v string) {
			if !set[flagName] && v != "" {
				*dst = v
			}
		}
		take("join", &o.join, strings.Join(c.Join, ","))
		take("master", &o.master, c.Master)
		take("gossip", &o.gossip, c.Gossip)
		take("key-file", &o.keyFile, c.KeyFile)
		take("name", &o.name, c.Name)
		if !set[grid.InsecureKeyFileFlag] && c.KeyInsecure != nil {
			o.keyAny = *c.KeyInsecure
		}
		// A number in the file has the flag's bounds: it is set
		// through the flag.
		number := func(flagName, key, v string) error {
			if set[flagName] || v == "" {
				return nil
			}
			if err := fs.Lookup(flagName).Value.Set(v); err != nil {
				return usagef("-config %s: %s %s: %v", o.config, key, v, err)
			}
			return nil
		}
		if c.Slots != nil {
			if err := number("slots", "slots", strconv.Itoa(*c.Slots)); err != nil {
				return err
			}
		}
		if c.ChildPort != nil {
			if err := number("child-port", "child_port", strconv.Itoa(*c.ChildPort)); err != nil {
				return err
			}
		}
		if !set["once"] && c.Once != nil {
			o.once = *c.Once
		}
		if c.MemShare != nil {
			if err := number("mem-share", "mem_share", strconv.FormatFloat(*c.MemShare, 'g', -1, 64)); err != nil {
				return err
			}
		}
		if err := number("idle-timeout", "idle_timeout", c.IdleTimeout); err != nil {
			return err
		}
		if err := number("plugin-start-timeout", "plugin_start_timeout", c.PluginStart); err != nil {
			return err
		}
		names := make([]string, 0, len(c.Plugins))
		for name := range c.Plugins {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			if slices.ContainsFunc(o.plugins, func(e plugin.Entry) bool { return e.Name == name }) {
				continue // the command line's wins
			}
			if err := plugin.CheckName(name); err != nil {
				return usagef("-config %s: %v", o.config, err)
			}
			entries = append(entries, plugin.Entry{Name: name, Path: c.Plugins[name]})
		}
	}
	entries = append(entries, o.plugins...)
	cat, err := plugin.NewCatalog(entries...)
	if err != nil {
		return usagef("-plugin: %v", err)
	}
	o.catalog = cat
	return nil
}
