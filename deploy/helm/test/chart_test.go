// Package test renders the mcp-resume chart with Helm's own engine and decodes
// every manifest strictly into the Kubernetes API types (an unknown or misplaced
// field fails), then checks the settings that matter for a cluster of instances:
// the args, the probes, the security context, the grace period, the Service's
// affinity, the PodDisruptionBudget. The values are checked against
// values.schema.json as `helm install` would.
//
// A module of its own (deploy/helm/test/go.mod): Helm and k8s.io/api stay out of
// the main module. Run it with .ci/chart.
package test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"sigs.k8s.io/yaml"
)

const chartDir = "../mcp-resume"

// serviceMonitor is the part of the Prometheus Operator's type that the chart
// writes (its CRD is not in k8s.io/api); decoded strictly like the others.
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port          string `json:"port"`
			Path          string `json:"path"`
			Interval      string `json:"interval"`
			Authorization struct {
				Type        string                   `json:"type"`
				Credentials corev1.SecretKeySelector `json:"credentials"`
			} `json:"authorization"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// rendered is one render of the chart, decoded.
type rendered struct {
	files       map[string]string // template name -> text
	deployment  *appsv1.Deployment
	service     *corev1.Service
	pdb         *policyv1.PodDisruptionBudget
	hpa         *autoscalingv2.HorizontalPodAutoscaler
	monitor     *serviceMonitor
	secrets     map[string]*corev1.Secret
	configMap   *corev1.ConfigMap
	kinds       []string
	docs        int
	valuesError error
}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("loading the chart: %v", err)
	}
	return c
}

// render renders the chart with vals over its values.yaml, as `helm template
// --namespace mcp --name-template mr` would.
func render(t *testing.T, vals map[string]any) (*rendered, error) {
	t.Helper()
	c := loadChart(t)
	opts := chartutil.ReleaseOptions{Name: "mr", Namespace: "mcp", Revision: 1, IsInstall: true}
	rv, err := chartutil.ToRenderValues(c, vals, opts, chartutil.DefaultCapabilities)
	if err != nil {
		return &rendered{valuesError: err}, err
	}
	files, err := engine.Render(c, rv)
	if err != nil {
		return nil, err
	}
	r := &rendered{files: files, secrets: map[string]*corev1.Secret{}}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		for _, doc := range strings.Split(files[name], "\n---") {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			if err := r.decode(name, []byte(doc)); err != nil {
				return nil, err
			}
		}
	}
	return r, nil
}

// decode decodes one manifest strictly into the type of its kind.
func (r *rendered) decode(file string, doc []byte) error {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return fmt.Errorf("%s: %v\n%s", file, err, doc)
	}
	want := map[string]string{
		"Deployment":              "apps/v1",
		"Service":                 "v1",
		"Secret":                  "v1",
		"ConfigMap":               "v1",
		"PodDisruptionBudget":     "policy/v1",
		"HorizontalPodAutoscaler": "autoscaling/v2",
		"ServiceMonitor":          "monitoring.coreos.com/v1",
	}[tm.Kind]
	if want == "" || tm.APIVersion != want {
		return fmt.Errorf("%s: unexpected %s %s", file, tm.APIVersion, tm.Kind)
	}
	var obj any
	switch tm.Kind {
	case "Deployment":
		r.deployment = &appsv1.Deployment{}
		obj = r.deployment
	case "Service":
		r.service = &corev1.Service{}
		obj = r.service
	case "ConfigMap":
		r.configMap = &corev1.ConfigMap{}
		obj = r.configMap
	case "Secret":
		s := &corev1.Secret{}
		obj = s
		defer func() { r.secrets[s.Name] = s }()
	case "PodDisruptionBudget":
		r.pdb = &policyv1.PodDisruptionBudget{}
		obj = r.pdb
	case "HorizontalPodAutoscaler":
		r.hpa = &autoscalingv2.HorizontalPodAutoscaler{}
		obj = r.hpa
	case "ServiceMonitor":
		r.monitor = &serviceMonitor{}
		obj = r.monitor
	}
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return fmt.Errorf("%s: %s does not decode strictly: %v\n%s", file, tm.Kind, err, doc)
	}
	r.kinds = append(r.kinds, tm.Kind)
	r.docs++
	return nil
}

func mustRender(t *testing.T, vals map[string]any) *rendered {
	t.Helper()
	r, err := render(t, vals)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// withKeys is the least a render needs: some authentication.
func withKeys(extra map[string]any) map[string]any {
	v := map[string]any{
		"auth": map[string]any{"apiKeys": map[string]any{"keys": map[string]any{
			"alice": "alice-key-0123456789abcdef",
			"bob":   "bob-key-0123456789abcdef",
		}}},
	}
	for k, x := range extra {
		v[k] = x
	}
	return v
}

// argValue returns the value after flag in args, and whether flag is there once.
func argValue(args []string, flag string) (string, bool) {
	i := slices.Index(args, flag)
	if i < 0 || i+1 >= len(args) || slices.Index(args[i+1:], flag) >= 0 {
		return "", false
	}
	return args[i+1], true
}

func TestRenderReplicas(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("replicas=%d", n), func(t *testing.T) {
			r := mustRender(t, withKeys(map[string]any{
				"replicaCount": n,
				"nats":         map[string]any{"url": "nats://nats-0.nats-headless:4222,nats://nats-1.nats-headless:4222", "replicas": n},
			}))
			if out := os.Getenv("MR_CHART_OUT"); out != "" {
				writeManifests(t, r, filepath.Join(out, fmt.Sprintf("replicas-%d", n)))
			}
			gotKinds := slices.Clone(r.kinds)
			sort.Strings(gotKinds)
			if want := []string{"Deployment", "PodDisruptionBudget", "Secret", "Service"}; !reflect.DeepEqual(gotKinds, want) {
				t.Fatalf("kinds %v, want %v", gotKinds, want)
			}
			d := r.deployment
			if d.Spec.Replicas == nil || *d.Spec.Replicas != int32(n) {
				t.Errorf("replicas %v, want %d", d.Spec.Replicas, n)
			}
			checkDeployment(t, d, n)
			checkService(t, r.service, d)
			checkPDB(t, r.pdb, d)
			checkKeys(t, r, d)
		})
	}
}

func checkDeployment(t *testing.T, d *appsv1.Deployment, natsReplicas int) {
	t.Helper()
	pod := d.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.Args[0] != "serve" {
		t.Errorf("args start %q, want serve", c.Args[0])
	}
	for flag, want := range map[string]string{
		"--http":          "0.0.0.0:8080",
		"--path":          "/mcp",
		"--nats-url":      "nats://nats-0.nats-headless:4222,nats://nats-1.nats-headless:4222",
		"--replicas":      fmt.Sprint(natsReplicas),
		"--instance":      "$(POD_NAME)",
		"--drain-grace":   "20s",
		"--lease":         "30s",
		"--api-keys":      "/etc/mcp-resume/api-keys/keys",
		"--allowed-hosts": "*",
	} {
		if got, ok := argValue(c.Args, flag); !ok || got != want {
			t.Errorf("%s %q (once: %v), want %q; args %q", flag, got, ok, want, c.Args)
		}
	}
	if slices.Contains(c.Args, "--insecure-no-auth") {
		t.Errorf("--insecure-no-auth without asking")
	}
	// --instance $(POD_NAME): the pod's name from the downward API.
	var podName *corev1.EnvVar
	for i := range c.Env {
		if c.Env[i].Name == "POD_NAME" {
			podName = &c.Env[i]
		}
	}
	if podName == nil || podName.ValueFrom == nil || podName.ValueFrom.FieldRef == nil || podName.ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("POD_NAME is not the downward API's metadata.name: %+v", podName)
	}
	// Grace: drain 20 s + 10 s to exit.
	if g := pod.TerminationGracePeriodSeconds; g == nil || *g != 30 {
		t.Errorf("terminationGracePeriodSeconds %v, want 30", g)
	}
	// Probes.
	for name, p := range map[string]*corev1.Probe{"/healthz": c.LivenessProbe, "/readyz": c.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != name || p.HTTPGet.Port.String() != "http" {
			t.Errorf("probe %s: %+v", name, p)
		}
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != "http" || c.Ports[0].ContainerPort != 8080 {
		t.Errorf("ports %+v", c.Ports)
	}
	// Security.
	sc := c.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 ||
		sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("container securityContext %+v", sc)
	}
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsUser == nil || *psc.RunAsUser != 65532 || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v", psc)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Errorf("the service account token is mounted")
	}
	if c.Resources.Limits.Memory().IsZero() || c.Resources.Requests.Cpu().IsZero() {
		t.Errorf("resources %+v", c.Resources)
	}
	// Rolling updates: one at a time, never below the count.
	ru := d.Spec.Strategy.RollingUpdate
	if ru == nil || ru.MaxUnavailable == nil || ru.MaxUnavailable.IntValue() != 0 || ru.MaxSurge == nil || ru.MaxSurge.IntValue() != 1 {
		t.Errorf("rolling update %+v", ru)
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || !sel.Matches(labelSet(d.Spec.Template.Labels)) {
		t.Errorf("the selector %v does not match the pod's labels %v", d.Spec.Selector, d.Spec.Template.Labels)
	}
}

type labelSet map[string]string

func (l labelSet) Has(k string) bool              { _, ok := l[k]; return ok }
func (l labelSet) Get(k string) string            { return l[k] }
func (l labelSet) Lookup(k string) (string, bool) { v, ok := l[k]; return v, ok }

func checkService(t *testing.T, s *corev1.Service, d *appsv1.Deployment) {
	t.Helper()
	if s.Spec.SessionAffinity != corev1.ServiceAffinityClientIP || s.Spec.SessionAffinityConfig == nil ||
		s.Spec.SessionAffinityConfig.ClientIP == nil || *s.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds != 10800 {
		t.Errorf("sessionAffinity %q %+v", s.Spec.SessionAffinity, s.Spec.SessionAffinityConfig)
	}
	for k, v := range s.Spec.Selector {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("the Service selects %s=%s, which the pods lack", k, v)
		}
	}
	if len(s.Spec.Ports) != 1 || s.Spec.Ports[0].TargetPort.String() != "http" {
		t.Errorf("service ports %+v", s.Spec.Ports)
	}
}

func checkPDB(t *testing.T, p *policyv1.PodDisruptionBudget, d *appsv1.Deployment) {
	t.Helper()
	if p == nil || p.Spec.MaxUnavailable == nil || p.Spec.MaxUnavailable.IntValue() != 1 {
		t.Fatalf("PodDisruptionBudget %+v", p)
	}
	sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
	if err != nil || !sel.Matches(labelSet(d.Spec.Template.Labels)) {
		t.Errorf("the PDB does not select the pods")
	}
}

// checkKeys: the keys file is a Secret mounted where --api-keys looks.
func checkKeys(t *testing.T, r *rendered, d *appsv1.Deployment) {
	t.Helper()
	s := r.secrets["mr-mcp-resume-api-keys"]
	if s == nil {
		t.Fatalf("no API keys Secret; have %v", r.secrets)
	}
	if got, want := s.StringData["keys"], "alice:alice-key-0123456789abcdef\nbob:bob-key-0123456789abcdef\n"; got != want {
		t.Errorf("keys file %q, want %q", got, want)
	}
	pod := d.Spec.Template.Spec
	var vol *corev1.Volume
	for i := range pod.Volumes {
		if pod.Volumes[i].Secret != nil && pod.Volumes[i].Secret.SecretName == s.Name {
			vol = &pod.Volumes[i]
		}
	}
	if vol == nil {
		t.Fatalf("the keys Secret is not a volume")
	}
	for _, m := range pod.Containers[0].VolumeMounts {
		if m.Name == vol.Name {
			if m.MountPath != "/etc/mcp-resume/api-keys" || !m.ReadOnly || m.SubPath != "" {
				t.Errorf("keys mounted %+v (no subPath, so that an update reaches the file)", m)
			}
			return
		}
	}
	t.Errorf("the keys volume is not mounted")
}

func TestRenderOptional(t *testing.T) {
	r := mustRender(t, withKeys(map[string]any{
		"autoscaling":         map[string]any{"enabled": true, "minReplicas": 3, "maxReplicas": 6},
		"serviceMonitor":      map[string]any{"enabled": true, "bearerTokenSecret": map[string]any{"name": "prom-key"}},
		"service":             map[string]any{"sessionAffinity": "None"},
		"drainGrace":          45,
		"preStopSleepSeconds": 5,
		"podDisruptionBudget": map[string]any{"enabled": false},
	}))
	if r.hpa == nil || r.hpa.Spec.MaxReplicas != 6 || *r.hpa.Spec.MinReplicas != 3 || r.hpa.Spec.ScaleTargetRef.Name != r.deployment.Name {
		t.Errorf("HPA %+v", r.hpa)
	}
	if r.deployment.Spec.Replicas != nil {
		t.Errorf("replicas set beside an HPA")
	}
	if r.pdb != nil {
		t.Errorf("PDB rendered while disabled")
	}
	m := r.monitor
	if m == nil || len(m.Spec.Endpoints) != 1 || m.Spec.Endpoints[0].Path != "/metrics" || m.Spec.Endpoints[0].Authorization.Credentials.Name != "prom-key" {
		t.Errorf("ServiceMonitor %+v", m)
	}
	if r.service.Spec.SessionAffinity != corev1.ServiceAffinityNone || r.service.Spec.SessionAffinityConfig != nil {
		t.Errorf("service affinity %q", r.service.Spec.SessionAffinity)
	}
	pod := r.deployment.Spec.Template.Spec
	if g := *pod.TerminationGracePeriodSeconds; g != 60 {
		t.Errorf("grace %d, want 5 + 45 + 10", g)
	}
	if got, _ := argValue(pod.Containers[0].Args, "--drain-grace"); got != "45s" {
		t.Errorf("--drain-grace %q", got)
	}
	if l := pod.Containers[0].Lifecycle; l == nil || l.PreStop == nil || l.PreStop.Sleep == nil || l.PreStop.Sleep.Seconds != 5 {
		t.Errorf("preStop %+v", l)
	}
}

// values.policies: a ConfigMap holding the policy file, mounted into the pod
// and named by --config; none without it.
func TestRenderPolicies(t *testing.T) {
	if r := mustRender(t, withKeys(nil)); r.configMap != nil {
		t.Fatalf("a ConfigMap without policies: %+v", r.configMap)
	}
	r := mustRender(t, withKeys(map[string]any{"policies": map[string]any{
		"version": 1,
		"tools":   map[string]any{"deploy": map[string]any{"timeout": "20m", "concurrency": map[string]any{"max": 2}}},
	}}))
	if r.configMap == nil {
		t.Fatal("no ConfigMap for the policies")
	}
	var file struct {
		Version int                       `json:"version"`
		Tools   map[string]map[string]any `json:"tools"`
	}
	if err := yaml.UnmarshalStrict([]byte(r.configMap.Data["policies.yaml"]), &file); err != nil || file.Version != 1 || file.Tools["deploy"]["timeout"] != "20m" {
		t.Fatalf("policies.yaml %q: %+v, %v", r.configMap.Data["policies.yaml"], file, err)
	}
	pod := r.deployment.Spec.Template.Spec
	if got, _ := argValue(pod.Containers[0].Args, "--config"); got != "/etc/mcp-resume/policies/policies.yaml" {
		t.Errorf("--config %q", got)
	}
	var mounted, volume bool
	for _, m := range pod.Containers[0].VolumeMounts {
		mounted = mounted || m.Name == "policies" && m.MountPath == "/etc/mcp-resume/policies" && m.ReadOnly
	}
	for _, v := range pod.Volumes {
		volume = volume || v.Name == "policies" && v.ConfigMap != nil && v.ConfigMap.Name == r.configMap.Name
	}
	if !mounted || !volume {
		t.Errorf("the policies' volume: mounted %v, from the ConfigMap %v", mounted, volume)
	}
	if _, err := render(t, withKeys(map[string]any{"policies": map[string]any{"tools": map[string]any{}}})); err == nil {
		t.Error("policies without a version rendered")
	}
	if pod.Containers[0].Args[0] != "serve" || r.deployment.Spec.Template.Annotations["checksum/upstreams"] != "" {
		t.Errorf("policies without upstreams: %s, annotations %v", pod.Containers[0].Args[0], r.deployment.Spec.Template.Annotations)
	}
}

// A policy file that names upstreams makes the pods gateways of them; a
// change of the upstreams (not of the rest) rolls the pods.
func TestRenderUpstreams(t *testing.T) {
	values := func(url string, timeout string) map[string]any {
		return withKeys(map[string]any{"policies": map[string]any{
			"version":   1,
			"defaults":  map[string]any{"timeout": timeout},
			"upstreams": []any{map[string]any{"name": "tickets", "url": url}},
		}})
	}
	a := mustRender(t, values("http://tickets:8080/mcp", "1h"))
	if args := a.deployment.Spec.Template.Spec.Containers[0].Args; args[0] != "gateway" {
		t.Fatalf("args %v, want gateway first", args)
	}
	sum := func(r *rendered) string { return r.deployment.Spec.Template.Annotations["checksum/upstreams"] }
	b := mustRender(t, values("http://tickets:8080/mcp", "2h"))
	c := mustRender(t, values("http://tickets:9090/mcp", "1h"))
	if sum(a) == "" || sum(a) != sum(b) || sum(a) == sum(c) {
		t.Errorf("checksum/upstreams: %q, %q after a policy change, %q after an upstream's", sum(a), sum(b), sum(c))
	}
}

func TestRenderOAuth(t *testing.T) {
	r := mustRender(t, map[string]any{"auth": map[string]any{"oauth": map[string]any{
		"issuers":      []any{"https://login.example.com", "https://other.example.com"},
		"publicURL":    "https://mcp.example.com/mcp",
		"scopes":       []any{"mcp:read", "mcp:call"},
		"toolScopes":   map[string]any{"deploy": "admin ops"},
		"clientID":     "mcp-resume",
		"clientSecret": "s3cret",
	}}})
	c := r.deployment.Spec.Template.Spec.Containers[0]
	if n := strings.Count(strings.Join(c.Args, " "), "--oauth-issuer "); n != 2 {
		t.Errorf("%d --oauth-issuer, want 2: %q", n, c.Args)
	}
	for flag, want := range map[string]string{
		"--public-url":       "https://mcp.example.com/mcp",
		"--oauth-scope":      "mcp:read,mcp:call",
		"--oauth-tool-scope": "deploy=admin ops",
		"--oauth-client-id":  "mcp-resume",
	} {
		if got, ok := argValue(c.Args, flag); !ok || got != want {
			t.Errorf("%s %q, want %q", flag, got, want)
		}
	}
	if slices.Contains(c.Args, "--api-keys") {
		t.Errorf("--api-keys without keys")
	}
	var found bool
	for _, e := range c.Env {
		if e.Name == "MCP_RESUME_OAUTH_CLIENT_SECRET" {
			found = e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == "mr-mcp-resume-oauth" && e.ValueFrom.SecretKeyRef.Key == "client-secret"
		}
	}
	if !found {
		t.Errorf("MCP_RESUME_OAUTH_CLIENT_SECRET not from the Secret: %+v", c.Env)
	}
	if s := r.secrets["mr-mcp-resume-oauth"]; s == nil || s.StringData["client-secret"] != "s3cret" {
		t.Errorf("OAuth Secret %+v", s)
	}
}

// TestRefused: what the chart or its schema must not accept.
func TestRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		vals map[string]any
		want string
	}{
		{"no authentication", map[string]any{}, "no authentication"},
		{"issuer without publicURL", map[string]any{"auth": map[string]any{"oauth": map[string]any{"issuers": []any{"https://a.example"}}}}, "publicURL"},
		{"unknown key", withKeys(map[string]any{"replicas": 3}), "replicas"},
		{"unknown nested key", withKeys(map[string]any{"nats": map[string]any{"url": "nats://n:4222", "replicas": 3, "jetstream": true}}), "jetstream"},
		{"nats replicas 7", withKeys(map[string]any{"nats": map[string]any{"url": "nats://n:4222", "replicas": 7}}), "replicas"},
		{"drainGrace as a string", withKeys(map[string]any{"drainGrace": "20s"}), "drainGrace"},
		{"affinity Sticky", withKeys(map[string]any{"service": map[string]any{"sessionAffinity": "Sticky"}}), "sessionAffinity"},
		{"short key", map[string]any{"auth": map[string]any{"apiKeys": map[string]any{"keys": map[string]any{"alice": "short"}}}}, "keys"},
		{"a dot in the name", withKeys(map[string]any{"nameOverride": "mcp.resume"}), "nameOverride"},
		// Passed through by the schema, caught by the strict decoding.
		{"a misspelled container field", withKeys(map[string]any{"securityContext": map[string]any{"readOnlyRootFS": true}}), "readOnlyRootFS"},
		{"a monitor without a token", withKeys(map[string]any{"serviceMonitor": map[string]any{"enabled": true}}), "bearerTokenSecret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := render(t, tc.vals)
			if err == nil {
				t.Fatalf("rendered")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name %q", err, tc.want)
			}
		})
	}
}

// TestValuesFileValid: values.yaml as shipped passes its own schema.
func TestValuesFileValid(t *testing.T) {
	c := loadChart(t)
	if c.Schema == nil {
		t.Fatal("no values.schema.json")
	}
	if err := chartutil.ValidateAgainstSchema(c, c.Values); err != nil {
		t.Fatal(err)
	}
}

func writeManifests(t *testing.T, r *rendered, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var all []string
	for name, text := range r.files {
		if strings.HasSuffix(name, ".yaml") && strings.TrimSpace(text) != "" {
			all = append(all, "# "+name+"\n"+text)
		}
	}
	sort.Strings(all)
	if err := os.WriteFile(filepath.Join(dir, "all.yaml"), []byte(strings.Join(all, "\n---\n")), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRenderValuesFile renders the chart with the values file MR_CHART_VALUES
// into MR_CHART_OUT/all.yaml, as `helm template` would (strictly decoded like the
// rest), for a look or a `podman kube play`; skipped without them.
func TestRenderValuesFile(t *testing.T) {
	in, out := os.Getenv("MR_CHART_VALUES"), os.Getenv("MR_CHART_OUT")
	if in == "" || out == "" {
		t.Skip("MR_CHART_VALUES and MR_CHART_OUT not set")
	}
	vals, err := chartutil.ReadValuesFile(in)
	if err != nil {
		t.Fatal(err)
	}
	r := mustRender(t, vals)
	writeManifests(t, r, out)
	if os.Getenv("MR_CHART_PODMAN") != "" {
		writePodman(t, r.deployment, filepath.Join(out, "podman.yaml"))
	}
}

// writePodman writes d as podman 4.3's kube play can run it beside a NATS on the
// host's loopback (.ci/kubeplay): on the host's network (so no port mappings),
// $(POD_NAME) written out (podman does not expand it in args), the keys from the
// environment rather than a Secret volume (podman 4.3 mounts a kube Secret's data
// still encoded), and MR_CHART_PODMAN_DROP's flags (with their values) left out,
// for a binary that lacks them.
func writePodman(t *testing.T, d *appsv1.Deployment, path string) {
	t.Helper()
	d = d.DeepCopy()
	pod := &d.Spec.Template.Spec
	pod.HostNetwork = true
	c := &pod.Containers[0]
	port := c.Ports[0].ContainerPort
	c.Ports = nil
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
		p.HTTPGet.Port.Type, p.HTTPGet.Port.IntVal = 0, port
	}
	podName := d.Name + "-pod-0"
	drop := strings.Fields(os.Getenv("MR_CHART_PODMAN_DROP"))
	var args []string
	for i := 0; i < len(c.Args); i++ {
		a := c.Args[i]
		switch {
		case a == "--api-keys" || slices.Contains(drop, a):
			i++ // and its value
		default:
			args = append(args, strings.ReplaceAll(a, "$(POD_NAME)", podName))
		}
	}
	c.Args = args
	c.Env = append(c.Env, corev1.EnvVar{Name: "MCP_RESUME_API_KEYS", Value: os.Getenv("MR_CHART_PODMAN_KEYS")})
	var mounts []corev1.VolumeMount
	for _, m := range c.VolumeMounts {
		if m.Name != "api-keys" {
			mounts = append(mounts, m)
		}
	}
	c.VolumeMounts = mounts
	var vols []corev1.Volume
	for _, v := range pod.Volumes {
		if v.Secret == nil {
			vols = append(vols, v)
		}
	}
	pod.Volumes = vols
	b, err := yaml.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestLint runs `helm lint`'s checks (Chart.yaml, templates, values) with the
// least values that render; an info (the chart has no icon) passes, a warning
// or an error fails.
func TestLint(t *testing.T) {
	l := lint.All(chartDir, withKeys(nil), "mcp", false)
	for _, m := range l.Messages {
		t.Log(m)
		if m.Severity >= support.WarningSev {
			t.Error(m)
		}
	}
}
