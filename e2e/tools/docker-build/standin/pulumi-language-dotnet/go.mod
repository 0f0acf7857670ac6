// A stand-in for the one package of github.com/pulumi/pulumi-dotnet/pulumi-language-dotnet/v3
// the docker-build provider imports, which the Go module proxy refuses (v3.107.0). Only the type
// it names in its schema's `language.csharp` section (SDK generation options).
module github.com/pulumi/pulumi-dotnet/pulumi-language-dotnet/v3

go 1.26.0
