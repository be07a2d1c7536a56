package main

// fieldFlags names sweep.Config's fields as essim's flags, for the
// messages of sweep.Config.CheckLimits.
var fieldFlags = map[string]string{
	"Grains": "-grain", "Delays": "-delay", "EngineCost": "-engine-cost", "Slowdowns": "-slowdown",
	"Lambda": "-lambda", "Mu": "-mu", "Gens": "-gens", "Tasks": "-tasks", "Policies": "-policy",
	"Set": "-machines", "Trials": "-trials", "Parallel": "-parallel",
}

// checkLimits checks the parsed flags and the machine set against what
// one run may hold and what this machine's memory allows.
func checkLimits(o *options) error {
	if err := o.sweep().CheckLimits(fieldFlags); err != nil {
		return usageError{err}
	}
	return nil
}
