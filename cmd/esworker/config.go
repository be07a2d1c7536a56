package main

import (
	"flag"
	"slices"

	"github.com/esgrid/esgrid/problems/plugin"
	"github.com/esgrid/esgrid/worker"
)

// applyConfig merges the -config file (if any) under the flags given on
// the command line (worker.FileConfig.ApplyFlags), and checks the plugin
// list: -plugin entries are added to the file's, replacing a file entry
// of the same name. It fills o.catalog.
func (o *options) applyConfig(fs *flag.FlagSet) error {
	var entries []plugin.Entry
	if o.config != "" {
		c, err := worker.LoadFileConfig(o.config)
		if err != nil {
			return usagef("-config: %v", err)
		}
		if err := c.ApplyFlags(fs); err != nil {
			return usagef("-config %s: %v", o.config, err)
		}
		onCommandLine := func(name string) bool {
			return slices.ContainsFunc(o.plugins, func(e plugin.Entry) bool { return e.Name == name })
		}
		if entries, err = c.PluginEntries(onCommandLine); err != nil {
			return usagef("-config %s: %v", o.config, err)
		}
	}
	cat, err := plugin.NewCatalog(append(entries, o.plugins...)...)
	if err != nil {
		return usagef("-plugin: %v", err)
	}
	o.catalog = cat
	return nil
}
