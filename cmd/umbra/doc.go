// Command umbra runs exact similarity search on vector files without writing
// Go, and diagnoses the GPU stack the engine would use.
//
//	umbra probe                      every adapter, its probe verdict, Auto's choice
//	umbra search --data F --queries Q --k K
//	umbra convert IN OUT [--dtype f32|f16]
//	umbra version
//
// The command line is parsed by kong (cli.go): each command is a struct
// whose fields are its flags and arguments, and flags may come before or
// after positional arguments. Exit status is 0 on success, 1 on failure and 2 on a
// usage error; an error is one line on stderr starting with "umbra: ".
// Commands that work on stored index files (build, info, search --store) are
// meant to join the command table in main.go; nothing here assumes they don't
// exist. cmd/umbra/README.md documents the --json output of probe and search.
package main
