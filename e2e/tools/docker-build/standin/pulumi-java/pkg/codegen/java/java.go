// Package java stands in for pulumi-java's codegen package: the docker-build provider uses only
// PackageInfo, as the value of its schema's `language.java` key, read when generating a Java SDK.
// The JSON names are the ones the provider's published schema.json carries under that key.
package java

// PackageInfo holds the Java SDK generation options a provider publishes in its schema.
type PackageInfo struct {
	BasePackage                     string            `json:"basePackage"`
	BuildFiles                      string            `json:"buildFiles,omitempty"`
	Dependencies                    map[string]string `json:"dependencies,omitempty"`
	GradleNexusPublishPluginVersion string            `json:"gradleNexusPublishPluginVersion,omitempty"`
	GradleTest                      string            `json:"gradleTest"`
}
