// Command umbra runs exact similarity search on vector files without writing
// Go, and diagnoses the GPU stack the engine would use.
//
//	umbra probe                      every adapter, its probe verdict, Auto's choice
//	umbra build --data F [--ids I | --keys K] --out STORE
//	umbra add STORE --data F [--ids I] [--upsert]
//	umbra delete STORE --ids 1,2,3
//	umbra info STORE
//	umbra search (--data F | --store STORE) --queries Q --k K
//	umbra export STORE --out F.npy [--ids-out I.npy]
//	umbra convert IN OUT [--dtype f32|f16]
//	umbra version
//
// The command line is parsed by kong (cli.go, set up in cmd/internal/cmdline
// as for bench and demo): each command is a struct whose fields are its
// flags and arguments, with their help, and flags may come before or after
// positional arguments. A command's --help is generated from the same
// struct. Exit status is 0 on success, 1 on failure and 2 on a
// usage error; an error is one line on stderr starting with "umbra: ".
// The store commands (store.go, build.go, add.go, info.go, export.go) open
// an existing store through engine.Open and never create one by accident.
// cmd/umbra/README.md documents them and the --json output of probe, info
// and search.
package main
