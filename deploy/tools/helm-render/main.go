// helm-render renders a Helm chart the way `helm template` does, for CI
// machines that have Debian's Go libraries but no Helm (Helm is not packaged
// in Debian and nothing may be downloaded). It implements the part of Helm a
// chart sees: values (chart defaults, -f files, --set), Go templates with
// sprig's functions and Helm's own (include, tpl, required, toYaml, lookup,
// ...), .Release, .Chart, .Capabilities, .Files and .Template, and prints the
// manifests in Helm's install order with `# Source:` comments.
//
// Build (offline, against /usr/share/gocode; see deploy/check.sh):
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o helm-render .
//
// Usage:
//
//	helm-render [flags] [RELEASE] CHART_DIR
//	helm-render --namespace kube-system -f my.yaml --set a.b=1 hami deploy/helm/hami
//
// Exit codes: 0 rendered, 1 the chart does not render (the error says where),
// 2 bad usage.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/template"

	// Debian ships sprig v3 at github.com/Masterminds/sprig; in GOPATH mode
	// a main package outside GOPATH must name that directory.
	"github.com/Masterminds/sprig"
	yaml "gopkg.in/yaml.v2"
)

// ---------------------------------------------------------------- flags

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// setFlag keeps --set and --set-string in the order given, as Helm applies them.
type setFlag struct {
	list     *[]setArg
	asString bool
}
type setArg struct {
	text     string
	asString bool
}

func (s setFlag) String() string { return "" }
func (s setFlag) Set(v string) error {
	*s.list = append(*s.list, setArg{v, s.asString})
	return nil
}

type options struct {
	release     string
	namespace   string
	chartDir    string
	valueFiles  []string
	sets        []setArg
	kubeVersion string
	apiVersions []string
	strict      bool
	notes       bool
	isUpgrade   bool
}

func usage(fs *flag.FlagSet) {
	fmt.Fprintf(fs.Output(), "usage: helm-render [flags] [RELEASE] CHART_DIR\n"+
		"Renders a Helm chart like `helm template`. Exit codes: 0 rendered, 1 render error, 2 usage.\n")
	fs.PrintDefaults()
}

func parseArgs(args []string) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("helm-render", flag.ContinueOnError)
	var values multiFlag
	var apis multiFlag
	fs.StringVar(&o.namespace, "namespace", "default", "release namespace (.Release.Namespace)")
	fs.StringVar(&o.namespace, "n", "default", "shorthand for --namespace")
	fs.Var(&values, "f", "values file (repeatable; later files win)")
	fs.Var(&values, "values", "same as -f")
	fs.Var(setFlag{&o.sets, false}, "set", "a.b=v[,c=w] override (repeatable)")
	fs.Var(setFlag{&o.sets, true}, "set-string", "like --set, values kept as strings")
	fs.StringVar(&o.kubeVersion, "kube-version", "v1.30.0", "Kubernetes version for .Capabilities")
	fs.Var(&apis, "api-versions", "extra API version for .Capabilities.APIVersions (repeatable)")
	fs.BoolVar(&o.strict, "strict", false, "fail on a reference to a missing value (missingkey=error)")
	fs.BoolVar(&o.notes, "notes", false, "also print the rendered NOTES.txt (after the manifests)")
	fs.BoolVar(&o.isUpgrade, "is-upgrade", false, "render as an upgrade (.Release.IsUpgrade)")
	fs.Usage = func() { usage(fs) }
	// Go's flag package stops at the first positional argument; Helm users
	// put flags anywhere, so positionals are collected and parsing resumes.
	var positional []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) > 0 {
			positional = append(positional, args[0])
			args = args[1:]
		}
	}
	o.valueFiles = values
	o.apiVersions = apis
	switch len(positional) {
	case 1:
		o.release, o.chartDir = "release-name", positional[0]
	case 2:
		o.release, o.chartDir = positional[0], positional[1]
	default:
		fs.Usage()
		return nil, errors.New("expected [RELEASE] CHART_DIR")
	}
	return o, nil
}

// ---------------------------------------------------------------- values

// normalize turns what a YAML decoder returns into what Helm's templates see:
// maps keyed by string and, because Helm decodes values through JSON, every
// number a float64.
func normalize(v interface{}) interface{} {
	switch t := v.(type) {
	case map[interface{}]interface{}:
		m := make(map[string]interface{}, len(t))
		for k, val := range t {
			m[fmt.Sprint(k)] = normalize(val)
		}
		return m
	case map[string]interface{}:
		for k, val := range t {
			t[k] = normalize(val)
		}
		return t
	case []interface{}:
		for i := range t {
			t[i] = normalize(t[i])
		}
		return t
	case int:
		return float64(t)
	case int64:
		return float64(t)
	case uint64:
		return float64(t)
	default:
		return v
	}
}

func readValuesFile(file string) (map[string]interface{}, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var raw interface{}
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%s: %v", file, err)
	}
	if raw == nil {
		return map[string]interface{}{}, nil
	}
	m, ok := normalize(raw).(map[string]interface{})
	if !ok {
		return nil, fmt.Errorf("%s: the top level is not a mapping", file)
	}
	return m, nil
}

// coalesce merges src over dst the way Helm merges values: maps merge key by
// key, anything else is replaced, and a null removes the key.
func coalesce(dst, src map[string]interface{}) map[string]interface{} {
	for k, sv := range src {
		if sv == nil {
			delete(dst, k)
			continue
		}
		dm, dIsMap := dst[k].(map[string]interface{})
		sm, sIsMap := sv.(map[string]interface{})
		if dIsMap && sIsMap {
			dst[k] = coalesce(dm, sm)
		} else {
			dst[k] = sv
		}
	}
	return dst
}

// splitUnescaped splits s at sep where sep is not preceded by a backslash and
// not inside {...} (Helm's list syntax); the escapes stay for later stages.
func splitUnescaped(s string, sep byte) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '{':
			depth++
		case '}':
			if depth > 0 {
				depth--
			}
		case sep:
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

func unescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// typed gives a --set value Helm's type: true/false, null, whole numbers
// (int64, no leading zero), else the string.
func typed(v string, asString bool) interface{} {
	if asString {
		return v
	}
	switch strings.ToLower(v) {
	case "true":
		return true
	case "false":
		return false
	case "null":
		return nil
	}
	if v == "0" {
		return int64(0)
	}
	if len(v) > 0 && v[0] != '0' {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n
		}
	}
	return v
}

var indexRe = regexp.MustCompile(`^(.*)\[([0-9]+)\]$`)

// applySet applies one --set argument ("a.b=1,c[0].d=x,e={p,q}") to vals.
func applySet(vals map[string]interface{}, arg setArg) error {
	for _, pair := range splitUnescaped(arg.text, ',') {
		if pair == "" {
			continue
		}
		eq := strings.IndexByte(pair, '=')
		if eq < 0 {
			return fmt.Errorf("--set %q: expected key=value", pair)
		}
		key, raw := pair[:eq], pair[eq+1:]
		var value interface{}
		if !arg.asString && strings.HasPrefix(raw, "{") && strings.HasSuffix(raw, "}") {
			items := []interface{}{}
			if inner := raw[1 : len(raw)-1]; inner != "" {
				for _, it := range splitUnescaped(inner, ',') {
					items = append(items, typed(unescape(it), false))
				}
			}
			value = items
		} else {
			value = typed(unescape(raw), arg.asString)
		}
		if err := setPath(vals, splitUnescaped(key, '.'), value); err != nil {
			return fmt.Errorf("--set %s: %v", key, err)
		}
	}
	return nil
}

func setPath(m map[string]interface{}, parts []string, value interface{}) error {
	part := parts[0]
	idx := -1
	if mm := indexRe.FindStringSubmatch(part); mm != nil {
		part = mm[1]
		idx, _ = strconv.Atoi(mm[2])
	}
	part = unescape(part)
	if part == "" {
		return errors.New("empty key")
	}
	last := len(parts) == 1
	if idx < 0 {
		if last {
			if value == nil {
				delete(m, part)
			} else {
				m[part] = value
			}
			return nil
		}
		child, ok := m[part].(map[string]interface{})
		if !ok {
			child = map[string]interface{}{}
			m[part] = child
		}
		return setPath(child, parts[1:], value)
	}
	list, _ := m[part].([]interface{})
	for len(list) <= idx {
		list = append(list, nil)
	}
	m[part] = list
	if last {
		list[idx] = value
		return nil
	}
	child, ok := list[idx].(map[string]interface{})
	if !ok {
		child = map[string]interface{}{}
		list[idx] = child
	}
	return setPath(child, parts[1:], value)
}

// ---------------------------------------------------------------- chart

type chartFile struct {
	name string // relative to the chart directory, slash-separated
	data []byte
}

type loadedChart struct {
	meta      map[string]interface{} // Chart.yaml as Helm exposes it (.Chart.Name, ...)
	name      string
	values    map[string]interface{}
	templates []chartFile
	files     map[string][]byte
}

// helmignore reads .helmignore: plain names and globs, matched against the
// relative path and its base name; enough for the usual editor/VCS patterns.
func helmignore(dir string) []string {
	data, err := os.ReadFile(filepath.Join(dir, ".helmignore"))
	if err != nil {
		return nil
	}
	var pats []string
	for _, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		pats = append(pats, strings.TrimSuffix(l, "/"))
	}
	return pats
}

func ignored(rel string, pats []string) bool {
	for _, p := range pats {
		for _, cand := range []string{rel, path.Base(rel)} {
			if ok, _ := path.Match(p, cand); ok {
				return true
			}
		}
		if strings.HasPrefix(rel, p+"/") {
			return true
		}
	}
	return false
}

// chartMeta maps Chart.yaml keys to the field names Helm's .Chart has.
func chartMeta(raw map[string]interface{}) map[string]interface{} {
	special := map[string]string{"apiVersion": "APIVersion", "appVersion": "AppVersion",
		"kubeVersion": "KubeVersion"}
	out := map[string]interface{}{}
	for k, v := range raw {
		if s, ok := special[k]; ok {
			out[s] = v
		} else if k != "" {
			out[strings.ToUpper(k[:1])+k[1:]] = v
		}
	}
	return out
}

func loadChart(dir string) (*loadedChart, error) {
	c := &loadedChart{files: map[string][]byte{}}
	data, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		return nil, fmt.Errorf("not a chart directory: %v", err)
	}
	var raw interface{}
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("Chart.yaml: %v", err)
	}
	rawMap, ok := normalize(raw).(map[string]interface{})
	if !ok {
		return nil, errors.New("Chart.yaml: not a mapping")
	}
	for _, k := range []string{"apiVersion", "name", "version"} {
		if s, _ := rawMap[k].(string); s == "" {
			return nil, fmt.Errorf("Chart.yaml: %s is required (a string)", k)
		}
	}
	if rawMap["apiVersion"] != "v2" {
		return nil, fmt.Errorf("Chart.yaml: apiVersion %v: only v2 charts are supported", rawMap["apiVersion"])
	}
	c.name = rawMap["name"].(string)
	c.meta = chartMeta(rawMap)

	c.values = map[string]interface{}{}
	if _, err := os.Stat(filepath.Join(dir, "values.yaml")); err == nil {
		if c.values, err = readValuesFile(filepath.Join(dir, "values.yaml")); err != nil {
			return nil, err
		}
	}
	pats := helmignore(dir)
	// filepath.Walk does not follow symbolic links; Helm does (a file in the
	// chart may link to one elsewhere in the repository), so links are read.
	var walk func(abs, rel string) error
	walk = func(abs, rel string) error {
		entries, err := os.ReadDir(abs)
		if err != nil {
			return err
		}
		for _, e := range entries {
			r := path.Join(rel, e.Name())
			if ignored(r, pats) {
				continue
			}
			p := filepath.Join(abs, e.Name())
			st, err := os.Stat(p) // follows links
			if err != nil {
				return fmt.Errorf("%s: %v", r, err)
			}
			if st.IsDir() {
				if err := walk(p, r); err != nil {
					return err
				}
				continue
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if strings.HasPrefix(r, "templates/") {
				c.templates = append(c.templates, chartFile{r, b})
			} else if r != "Chart.yaml" && r != "values.yaml" {
				c.files[r] = b
			}
		}
		return nil
	}
	if err := walk(dir, ""); err != nil {
		return nil, err
	}
	sort.Slice(c.templates, func(i, j int) bool { return c.templates[i].name < c.templates[j].name })
	return c, nil
}

// ---------------------------------------------------------------- built-in objects

// KubeVersion is .Capabilities.KubeVersion.
type KubeVersion struct {
	Version    string
	Major      string
	Minor      string
	GitVersion string
}

func (k KubeVersion) String() string { return k.Version }

// APIVersions is .Capabilities.APIVersions.
type APIVersions []string

// Has says whether "group/version" or "group/version/Kind" is served.
func (a APIVersions) Has(v string) bool {
	for _, x := range a {
		if x == v {
			return true
		}
	}
	return false
}

// Capabilities is .Capabilities.
type Capabilities struct {
	KubeVersion KubeVersion
	APIVersions APIVersions
}

// Files is .Files: the chart's files outside templates/.
type Files map[string][]byte

// Get returns a file's content, "" if absent (as Helm).
func (f Files) Get(name string) string { return string(f[name]) }

// GetBytes returns a file's content as bytes.
func (f Files) GetBytes(name string) []byte { return f[name] }

// Glob returns the files whose names match pattern (path.Match syntax; Helm
// uses gobwas/glob, the same for the plain patterns charts use). An empty
// result is false in an `if`, as in Helm.
func (f Files) Glob(pattern string) Files {
	out := Files{}
	for name, data := range f {
		if ok, _ := path.Match(pattern, name); ok {
			out[name] = data
		}
	}
	return out
}

// Lines returns a file's lines.
func (f Files) Lines(name string) []string {
	if len(f[name]) == 0 {
		return []string{}
	}
	return strings.Split(strings.TrimRight(string(f[name]), "\n"), "\n")
}

var kubeVersionRe = regexp.MustCompile(`^v?([0-9]+)\.([0-9]+)(\.[0-9]+)?(.*)$`)

func capabilities(version string, extra []string) (Capabilities, error) {
	m := kubeVersionRe.FindStringSubmatch(version)
	if m == nil {
		return Capabilities{}, fmt.Errorf("--kube-version %q: expected v1.MINOR[.PATCH]", version)
	}
	patch := m[3]
	if patch == "" {
		patch = ".0"
	}
	v := "v" + m[1] + "." + m[2] + patch + m[4]
	minor, _ := strconv.Atoi(m[2])
	// The API groups every supported cluster serves, plus what the caller
	// names; charts test optional ones (monitoring.coreos.com/v1) with Has.
	apis := APIVersions{"v1", "apps/v1", "batch/v1", "rbac.authorization.k8s.io/v1",
		"admissionregistration.k8s.io/v1", "coordination.k8s.io/v1", "policy/v1beta1",
		"scheduling.k8s.io/v1", "storage.k8s.io/v1", "apiextensions.k8s.io/v1",
		"networking.k8s.io/v1", "node.k8s.io/v1beta1"}
	if minor >= 20 {
		apis = append(apis, "node.k8s.io/v1")
	}
	if minor >= 21 {
		apis = append(apis, "policy/v1", "batch/v1beta1")
	}
	apis = append(apis, extra...)
	return Capabilities{
		KubeVersion: KubeVersion{Version: v, Major: m[1], Minor: m[2], GitVersion: v},
		APIVersions: apis,
	}, nil
}

// ---------------------------------------------------------------- functions

// toYAML marshals like Helm (through JSON, so keys are sorted and values are
// what a JSON round trip makes of them), without the final newline.
func toYAML(v interface{}) (string, error) {
	j, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	var obj interface{}
	if err := yaml.Unmarshal(j, &obj); err != nil {
		return "", err
	}
	out, err := yaml.Marshal(obj)
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(string(out), "\n"), nil
}

func fromYAML(s string) map[string]interface{} {
	var raw interface{}
	if err := yaml.Unmarshal([]byte(s), &raw); err != nil {
		return map[string]interface{}{"Error": err.Error()}
	}
	if m, ok := normalize(raw).(map[string]interface{}); ok {
		return m
	}
	return map[string]interface{}{}
}

func fromYAMLArray(s string) []interface{} {
	var raw interface{}
	if err := yaml.Unmarshal([]byte(s), &raw); err != nil {
		return []interface{}{err.Error()}
	}
	if a, ok := normalize(raw).([]interface{}); ok {
		return a
	}
	return []interface{}{}
}

func toJSON(v interface{}) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

func fromJSON(s string) map[string]interface{} {
	m := map[string]interface{}{}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return map[string]interface{}{"Error": err.Error()}
	}
	return m
}

func fromJSONArray(s string) []interface{} {
	var a []interface{}
	if err := json.Unmarshal([]byte(s), &a); err != nil {
		return []interface{}{err.Error()}
	}
	return a
}

// renderer holds the parsed template set; include and tpl reach it through
// closures made before parsing (Parse needs every function name up front).
type renderer struct {
	root   *template.Template
	strict bool
}

func (r *renderer) funcs() template.FuncMap {
	f := sprig.TxtFuncMap()
	// Helm removes these: a chart must not depend on the renderer's environment.
	delete(f, "env")
	delete(f, "expandenv")
	f["toYaml"] = toYAML
	f["fromYaml"] = fromYAML
	f["fromYamlArray"] = fromYAMLArray
	f["toJson"] = toJSON
	f["fromJson"] = fromJSON
	f["fromJsonArray"] = fromJSONArray
	f["required"] = func(msg string, v interface{}) (interface{}, error) {
		if v == nil {
			return nil, errors.New(msg)
		}
		if s, ok := v.(string); ok && s == "" {
			return nil, errors.New(msg)
		}
		return v, nil
	}
	// `helm template` has no cluster: lookup finds nothing, as there.
	f["lookup"] = func(apiVersion, kind, namespace, name string) (map[string]interface{}, error) {
		return map[string]interface{}{}, nil
	}
	f["include"] = func(name string, data interface{}) (string, error) {
		var buf bytes.Buffer
		if err := r.root.ExecuteTemplate(&buf, name, data); err != nil {
			return "", err
		}
		return buf.String(), nil
	}
	f["tpl"] = func(text string, data interface{}) (string, error) {
		t, err := r.root.Clone()
		if err != nil {
			return "", err
		}
		t, err = t.New("tpl").Option(r.option()).Parse(text)
		if err != nil {
			return "", fmt.Errorf("tpl: %v", err)
		}
		var buf bytes.Buffer
		if err := t.Execute(&buf, data); err != nil {
			return "", fmt.Errorf("tpl: %v", err)
		}
		return strings.ReplaceAll(buf.String(), "<no value>", ""), nil
	}
	return f
}

func (r *renderer) option() string {
	if r.strict {
		return "missingkey=error"
	}
	return "missingkey=zero"
}

// ---------------------------------------------------------------- output

// installOrder is the order in which Helm installs (and `helm template`
// prints) kinds; kinds not listed come last.
var installOrder = []string{
	"PriorityClass", "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange",
	"PodSecurityPolicy", "PodDisruptionBudget", "ServiceAccount", "Secret", "SecretList",
	"ConfigMap", "StorageClass", "PersistentVolume", "PersistentVolumeClaim",
	"CustomResourceDefinition", "ClusterRole", "ClusterRoleList", "ClusterRoleBinding",
	"ClusterRoleBindingList", "Role", "RoleList", "RoleBinding", "RoleBindingList", "Service",
	"DaemonSet", "Pod", "ReplicationController", "ReplicaSet", "Deployment",
	"HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob", "IngressClass", "Ingress",
	"APIService", "RuntimeClass",
}

type manifest struct {
	source string
	kind   string
	name   string
	seq    int
	body   string
}

var docSep = regexp.MustCompile(`(?m)^---[ \t]*(#.*)?$`)

// meaningful says whether a document holds more than blank and comment lines.
func meaningful(doc string) bool {
	for _, l := range strings.Split(doc, "\n") {
		t := strings.TrimSpace(l)
		if t != "" && !strings.HasPrefix(t, "#") {
			return true
		}
	}
	return false
}

func kindRank(kind string) int {
	for i, k := range installOrder {
		if k == kind {
			return i
		}
	}
	return len(installOrder)
}

func run(o *options) error {
	c, err := loadChart(o.chartDir)
	if err != nil {
		return err
	}
	vals := c.values
	for _, f := range o.valueFiles {
		m, err := readValuesFile(f)
		if err != nil {
			return err
		}
		vals = coalesce(vals, m)
	}
	for _, s := range o.sets {
		if err := applySet(vals, s); err != nil {
			return err
		}
	}
	caps, err := capabilities(o.kubeVersion, o.apiVersions)
	if err != nil {
		return err
	}
	if kv, _ := c.meta["KubeVersion"].(string); kv != "" {
		compare := sprig.TxtFuncMap()["semverCompare"].(func(string, string) (bool, error))
		ok, err := compare(kv, caps.KubeVersion.Version)
		if err != nil {
			return fmt.Errorf("Chart.yaml kubeVersion %q: %v", kv, err)
		}
		if !ok {
			return fmt.Errorf("chart requires kubeVersion: %s which is incompatible with Kubernetes %s",
				kv, caps.KubeVersion.Version)
		}
	}

	r := &renderer{strict: o.strict}
	r.root = template.New(c.name).Option(r.option()).Funcs(r.funcs())
	for _, t := range c.templates {
		name := c.name + "/" + t.name
		if _, err := r.root.New(name).Parse(string(t.data)); err != nil {
			return err
		}
	}
	// One top-level object for every template, as Helm: a template may
	// memoise something in it (a generated certificate) for the others.
	top := map[string]interface{}{
		"Values": vals,
		"Release": map[string]interface{}{
			"Name": o.release, "Namespace": o.namespace, "Service": "Helm",
			"IsInstall": !o.isUpgrade, "IsUpgrade": o.isUpgrade, "Revision": 1,
		},
		"Chart":        c.meta,
		"Capabilities": caps,
		"Files":        Files(c.files),
	}
	var out []manifest
	var notes string
	for _, t := range c.templates {
		base := path.Base(t.name)
		if strings.HasPrefix(base, "_") {
			continue
		}
		name := c.name + "/" + t.name
		top["Template"] = map[string]interface{}{"Name": name, "BasePath": c.name + "/templates"}
		var buf bytes.Buffer
		if err := r.root.ExecuteTemplate(&buf, name, top); err != nil {
			return err
		}
		text := strings.ReplaceAll(buf.String(), "<no value>", "")
		if base == "NOTES.txt" {
			notes = text
			continue
		}
		for i, doc := range docSep.Split(text, -1) {
			if !meaningful(doc) {
				continue
			}
			var head struct {
				Kind     string `yaml:"kind"`
				Metadata struct {
					Name string `yaml:"name"`
				} `yaml:"metadata"`
			}
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				return fmt.Errorf("YAML parse error on %s (document %d): %v", name, i+1, err)
			}
			out = append(out, manifest{name, head.Kind, head.Metadata.Name, len(out),
				strings.Trim(doc, "\n")})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if ra, rb := kindRank(a.kind), kindRank(b.kind); ra != rb {
			return ra < rb
		}
		if a.kind != b.kind {
			return a.kind < b.kind
		}
		if a.name != b.name {
			return a.name < b.name
		}
		return a.seq < b.seq
	})
	w := bufferedStdout()
	for _, m := range out {
		fmt.Fprintf(w, "---\n# Source: %s\n%s\n", m.source, m.body)
	}
	if o.notes && notes != "" {
		fmt.Fprintf(w, "\nNOTES:\n%s\n", strings.TrimSpace(notes))
	}
	return w.Flush()
}

type flusher struct{ bytes.Buffer }

func (f *flusher) Flush() error {
	_, err := os.Stdout.Write(f.Bytes())
	return err
}

// bufferedStdout collects the whole output so that a render error prints
// nothing but the error.
func bufferedStdout() *flusher { return &flusher{} }

func main() {
	o, err := parseArgs(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "helm-render:", err)
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}
