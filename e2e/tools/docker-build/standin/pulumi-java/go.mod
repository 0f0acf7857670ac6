// A stand-in for the one package of github.com/pulumi/pulumi-java the docker-build provider
// imports, which the Go module proxy refuses (v1.29.0). Only the type it names in its schema's
// `language.java` section (SDK generation options); nothing the provider does with an image.
module github.com/pulumi/pulumi-java

go 1.26.0
