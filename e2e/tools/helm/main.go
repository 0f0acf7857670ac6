// helm-render renders a chart directory as `helm install` would apply it, with
// Helm's own chart loader, values coalescing, template engine and install
// ordering (helm.sh/helm/v3 at the pinned version), and no cluster: the
// e2e harness applies the result itself. CRDs of the chart's crds/ directory
// come first, as Helm installs them before the templates; hooks are left out
// (the charts the stacks install need none at install time).
//
//	helm-render --chart DIR --values values.json --name NAME --namespace NS --kube-version v1.35.4
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
)

func main() {
	chartDir := flag.String("chart", "", "chart directory")
	valuesFile := flag.String("values", "", "values as a JSON file (the Release's values)")
	name := flag.String("name", "", "release name")
	namespace := flag.String("namespace", "", "release namespace")
	kubeVersion := flag.String("kube-version", "", "the cluster's version, for .Capabilities.KubeVersion")
	flag.Parse()
	if *chartDir == "" || *name == "" || *namespace == "" || *kubeVersion == "" {
		fmt.Fprintln(os.Stderr, "helm-render: --chart, --name, --namespace and --kube-version are required")
		os.Exit(78)
	}
	out, err := render(*chartDir, *valuesFile, *name, *namespace, *kubeVersion)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helm-render:", err)
		os.Exit(1)
	}
	fmt.Print(out)
}

func render(chartDir, valuesFile, name, namespace, kubeVersion string) (string, error) {
	chrt, err := loader.Load(chartDir)
	if err != nil {
		return "", fmt.Errorf("loading chart %s: %w", chartDir, err)
	}
	values := map[string]interface{}{}
	if valuesFile != "" {
		raw, err := os.ReadFile(valuesFile)
		if err != nil {
			return "", err
		}
		if err := json.Unmarshal(raw, &values); err != nil {
			return "", fmt.Errorf("values %s: %w", valuesFile, err)
		}
	}
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		return "", err
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = *kv
	options := chartutil.ReleaseOptions{Name: name, Namespace: namespace, Revision: 1, IsInstall: true}
	renderValues, err := chartutil.ToRenderValues(chrt, values, options, caps)
	if err != nil {
		return "", fmt.Errorf("values: %w", err)
	}
	files, err := engine.Render(chrt, renderValues)
	if err != nil {
		return "", err
	}
	for path := range files {
		if strings.HasSuffix(path, "NOTES.txt") {
			delete(files, path)
		}
	}
	_, manifests, err := releaseutil.SortManifests(files, caps.APIVersions, releaseutil.InstallOrder)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, crd := range chrt.CRDObjects() {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", crd.Filename, strings.TrimSpace(string(crd.File.Data)))
	}
	for _, m := range manifests {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", m.Name, strings.TrimSpace(m.Content))
	}
	return b.String(), nil
}
