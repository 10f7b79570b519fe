// The module the proto's go_package names (github.com/mandate-dev/mandate/gen/go/...). Only this
// file is committed: `buf generate` writes the code beside it (see ../buf.gen.yaml), and
// ../go.mod replaces the module by this folder.
module github.com/mandate-dev/mandate/gen/go

go 1.24
