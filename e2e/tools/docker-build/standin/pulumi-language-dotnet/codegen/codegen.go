// Package codegen stands in for pulumi-language-dotnet's codegen package: the docker-build
// provider uses only CSharpPackageInfo, as the value of its schema's `language.csharp` key, read
// when generating a .NET SDK. The JSON names are the ones its published schema.json carries there.
package codegen

// CSharpPackageInfo holds the .NET SDK generation options a provider publishes in its schema.
type CSharpPackageInfo struct {
	PackageReferences    map[string]string `json:"packageReferences,omitempty"`
	RespectSchemaVersion bool              `json:"respectSchemaVersion,omitempty"`
}
