package main

import (
	"path/filepath"
	"strings"

	"github.com/esgrid/esgrid/internal/flagx"
	"github.com/esgrid/esgrid/report"
)

// checkFileSet refuses a command line on which one file the run writes
// would overwrite another it writes or needs: the checkpoint, the report
// and the partial report (-report FILE's FILE.partial) are three files,
// none of them the -resume checkpoint (unless it is the checkpoint kept
// up to date), the -plan, the key file or a plugin. Without it, -checkpoint
// R.partial -report R, interrupted, replaced the checkpoint by the partial
// report, and the hint "continue with -resume R.partial" named JSON.
func checkFileSet(o *options) error {
	ckpt := "-checkpoint " + o.checkpoint
	if !o.set["checkpoint"] {
		ckpt = "-resume " + o.checkpoint + " (the checkpoint this run keeps)"
	}
	files := []flagx.File{
		{What: ckpt, Path: o.checkpoint, Write: true},
		{What: "-report " + o.report, Path: o.report, Write: true},
	}
	if o.report != "" {
		partial := o.report + report.PartialSuffix
		files = append(files, flagx.File{What: "the partial report " + partial + " of -report " + o.report, Path: partial, Write: true})
	}
	if o.resume != "" && !flagx.SameFile(o.resume, o.checkpoint) {
		files = append(files, flagx.File{What: "-resume " + o.resume, Path: o.resume})
	}
	files = append(files,
		flagx.File{What: "-plan " + o.plan, Path: o.plan},
		flagx.File{What: "-key-file " + o.keyFile, Path: o.keyFile})
	for _, e := range o.plugins {
		if strings.ContainsRune(e.Path, filepath.Separator) { // else looked up in PATH
			files = append(files, flagx.File{What: "-plugin " + e.String(), Path: e.Path})
		}
	}
	if err := flagx.CheckFiles(files...); err != nil {
		return usagef("%v", err)
	}
	return nil
}

// checkOutputFiles refuses, before any work, a run that would replace a
// file it did not write: an existing -checkpoint (unless it is the one
// -resume continues) or -report, without -force.
func checkOutputFiles(o *options) error {
	for _, f := range []struct{ flag, path string }{{"-checkpoint", o.checkpoint}, {"-report", o.report}} {
		// A file that cannot be written at all fails now, not after
		// the first generation's work.
		if f.path == "" {
			continue
		}
		if err := flagx.CheckWritable(f.flag, f.path); err != nil {
			return usagef("%v", err)
		}
	}
	if o.force {
		return nil
	}
	if o.checkpoint != "" && !(o.resume != "" && flagx.SameFile(o.checkpoint, o.resume)) {
		switch exists, err := flagx.Exists(o.checkpoint); {
		case err != nil:
			return usagef("-checkpoint %s: %v", o.checkpoint, err)
		case exists:
			return usagef("-checkpoint %s: the file exists, and this run would replace it; continue that run with -resume %s, or give -force to start afresh over it", o.checkpoint, o.checkpoint)
		}
	}
	if o.report != "" {
		switch exists, err := flagx.Exists(o.report); {
		case err != nil:
			return usagef("-report %s: %v", o.report, err)
		case exists:
			return usagef("-report %s: the file exists, and this run would replace it; name another file, or give -force to replace it", o.report)
		}
	}
	return nil
}

// resumableCheckpoint is the checkpoint a failed run can be continued
// from, or "" when there is none: the -checkpoint file if this run wrote
// it (wrote: a generation completed, and the engine writes the checkpoint
// before it reports one), else the -resume file the run started from;
// either only if it is there now.
func resumableCheckpoint(o *options, wrote bool) string {
	if !wrote {
		return flagx.FirstRegular(o.resume)
	}
	return flagx.FirstRegular(o.checkpoint, o.resume)
}
