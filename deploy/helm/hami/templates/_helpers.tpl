{{/* Names. Object names are capped at 63 characters (DNS labels). */}}

{{- define "hami.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "hami.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "hami.scheduler.fullname" -}}
{{- printf "%s-scheduler" (include "hami.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "hami.devicePlugin.fullname" -}}
{{- printf "%s-device-plugin" (include "hami.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "hami.deviceConfig.name" -}}
{{- printf "%s-scheduler-device" (include "hami.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "hami.tls.secretName" -}}
{{- default (printf "%s-tls" (include "hami.scheduler.fullname" .)) .Values.scheduler.tls.existingSecret -}}
{{- end -}}

{{/* The DNS name the API server and kube-scheduler use for the extender. */}}
{{- define "hami.scheduler.serviceHost" -}}
{{- printf "%s.%s.svc" (include "hami.scheduler.fullname" .) .Release.Namespace -}}
{{- end -}}

{{/* Labels. */}}

{{- define "hami.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Called with (dict "root" $ "component" "scheduler"). */}}
{{- define "hami.selectorLabels" -}}
app.kubernetes.io/name: {{ include "hami.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "hami.labels" -}}
{{ include "hami.selectorLabels" . }}
helm.sh/chart: {{ include "hami.chart" .root }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
{{- with .root.Values.global.labels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
metadata.annotations from global.annotations and an extra map, on a new
line indented by .indent; nothing at all when both are empty. Called as
{{- include "hami.annotations" (dict "root" $ "extra" $map "indent" 2) }}
*/}}
{{- define "hami.annotations" -}}
{{- $all := merge (deepCopy (get . "extra" | default dict)) (deepCopy .root.Values.global.annotations) -}}
{{- with $all -}}
{{- printf "annotations:\n%s" (toYaml . | indent 2) | nindent (int $.indent) -}}
{{- end -}}
{{- end -}}

{{/*
Images, shaped as upstream's: <registry>/<repository>:<tag>, where
global.imageRegistry replaces the image's own registry and the tag falls back
to global.imageTag, then the chart's appVersion. Upstream's own image
(projecthami/hami) does not hold our binaries: it is replaced by ours (.ours)
at the chart's appVersion, and NOTES names the replacement.
Called with (dict "root" $ "image" .Values.x.image "ours" "hami-scheduler").
*/}}
{{- define "hami.upstreamImages" -}}projecthami/hami{{- end -}}

{{- define "hami.image" -}}
{{- $r := .root -}}
{{- $repo := required "an image repository is empty (scheduler.extender.image.repository, devicePlugin.image.repository)" .image.repository -}}
{{- $tag := get .image "tag" | default $r.Values.global.imageTag | default $r.Chart.AppVersion -}}
{{- if eq (trimPrefix "docker.io/" $repo) (include "hami.upstreamImages" .) -}}
{{- $repo = .ours -}}
{{- $tag = $r.Chart.AppVersion -}}
{{- end -}}
{{- $reg := $r.Values.global.imageRegistry | default (get .image "registry") -}}
{{- if $reg -}}
{{- printf "%s/%s:%s" (trimSuffix "/" $reg) $repo (toString $tag) -}}
{{- else -}}
{{- printf "%s:%s" $repo (toString $tag) -}}
{{- end -}}
{{- end -}}

{{- define "hami.monitor.image" -}}
{{- $img := deepCopy .Values.devicePlugin.image -}}
{{- range $k, $v := .Values.devicePlugin.monitor.image }}{{ if $v }}{{ $_ := set $img $k $v }}{{ end }}{{ end -}}
{{- include "hami.image" (dict "root" . "image" $img "ours" "hami-device-plugin") -}}
{{- end -}}

{{/*
imagePullSecrets of a pod: imagePullSecrets, global.imagePullSecrets and the
pullSecrets of its images (names, or {name: x}), each once. Called with
(dict "root" $ "images" (list .Values.x.image ...) "indent" 6).
*/}}
{{- define "hami.imagePullSecrets" -}}
{{- $names := list -}}
{{- $all := concat (.root.Values.imagePullSecrets | default list) (.root.Values.global.imagePullSecrets | default list) -}}
{{- range .images }}{{ if kindIs "map" . }}{{ $all = concat $all (get . "pullSecrets" | default list) }}{{ end }}{{ end -}}
{{- range $all -}}
{{- $n := toString . -}}
{{- if kindIs "map" . }}{{ $n = get . "name" | toString }}{{ end -}}
{{- if and $n (not (has $n $names)) }}{{ $names = append $names $n }}{{ end -}}
{{- end -}}
{{- with $names -}}
{{- printf "imagePullSecrets:" | nindent (int $.indent) -}}
{{- range . }}{{ printf "- name: %s" . | nindent (int $.indent) }}{{ end -}}
{{- end -}}
{{- end -}}

{{/* The cluster's version without distribution suffixes: v1.30.4+k3s1 -> v1.30.4. */}}
{{- define "hami.kubeVersion" -}}
{{- $v := regexFind "^v?[0-9]+\\.[0-9]+\\.[0-9]+" .Capabilities.KubeVersion.Version -}}
{{- if not $v -}}
{{- fail (printf "cannot read the Kubernetes version %q; set scheduler.kubeScheduler.image.tag" .Capabilities.KubeVersion.Version) -}}
{{- end -}}
{{- printf "v%s" (trimPrefix "v" $v) -}}
{{- end -}}

{{/*
kube-scheduler's image: upstream's map (registry, repository, tag,
pullPolicy), or this chart's older string with imageTag and imagePullPolicy.
Empty tag: the cluster's version.
*/}}
{{- define "hami.kubeScheduler.image" -}}
{{- $ks := .Values.scheduler.kubeScheduler -}}
{{- $ref := "" -}}
{{- $tag := "" -}}
{{- if kindIs "string" $ks.image -}}
{{- $ref = $ks.image -}}
{{- $tag = get $ks "imageTag" -}}
{{- else -}}
{{- $ref = required "scheduler.kubeScheduler.image.repository is empty" $ks.image.repository -}}
{{- with .Values.global.imageRegistry | default (get $ks.image "registry") }}{{ $ref = printf "%s/%s" (trimSuffix "/" .) $ref }}{{ end -}}
{{- $tag = get $ks.image "tag" | default (get $ks "imageTag") -}}
{{- end -}}
{{- if not $tag }}{{ $tag = include "hami.kubeVersion" . }}{{ end -}}
{{- printf "%s:%s" $ref (toString $tag) -}}
{{- end -}}

{{- define "hami.kubeScheduler.pullPolicy" -}}
{{- $ks := .Values.scheduler.kubeScheduler -}}
{{- if kindIs "string" $ks.image -}}
{{- get $ks "imagePullPolicy" | default "IfNotPresent" -}}
{{- else -}}
{{- get $ks "imagePullPolicy" | default (get $ks.image "pullPolicy") | default "IfNotPresent" -}}
{{- end -}}
{{- end -}}

{{/*
Extra arguments of a container, with upstream's klog flags turned into ours:
-v=N (or --v=N) and hami-scheduler's --debug set the log level instead of
being passed; kube-scheduler's --config and --policy-config-file are dropped
because the chart passes its own configuration. Called with (dict "args" list
"level" default "kind" scheduler|plugin|agent|kube); returns JSON
{"level": ..., "args": [...]}.
*/}}
{{- define "hami.extraArgs" -}}
{{- $level := .level -}}
{{- $args := list -}}
{{- range .args -}}
{{- $a := toString . -}}
{{- if regexMatch "^--?v=[0-9]+$" $a -}}
{{- $n := regexFind "[0-9]+$" $a | int -}}
{{- if eq $.kind "kube" }}{{ $level = $n }}
{{- else if eq $.kind "agent" }}{{ $level = ge $n 4 | ternary "debug" "info" }}
{{- else }}{{ $level = ge $n 4 | ternary 4 3 }}{{ end -}}
{{- else if and (eq $.kind "scheduler") (has $a (list "--debug" "--debug=true")) -}}
{{- $level = 4 -}}
{{- else if and (eq $.kind "kube") (regexMatch "^--(config|policy-config-file)=" $a) -}}
{{- else -}}
{{- $args = append $args $a -}}
{{- end -}}
{{- end -}}
{{- toJson (dict "level" $level "args" $args) -}}
{{- end -}}

{{/* Extra env entries (a list; upstream's default {} is empty). Called with (dict "env" x "key" "devicePlugin.extraEnvs" "indent" 12). */}}
{{- define "hami.extraEnvs" -}}
{{- with .env -}}
{{- if not (kindIs "slice" .) -}}
{{- fail (printf "%s must be a list of env entries ({name, value}), got %s" $.key (toJson .)) -}}
{{- end -}}
{{- toYaml . | nindent (int $.indent) -}}
{{- end -}}
{{- end -}}

{{/* KubeSchedulerConfiguration apiVersion: the value, else by cluster version. */}}
{{- define "hami.kubeScheduler.configApiVersion" -}}
{{- $v := .Values.scheduler.kubeScheduler.configApiVersion -}}
{{- if $v -}}
{{- if not (has $v (list "v1" "v1beta3" "v1beta2" "v1beta1")) -}}
{{- fail (printf "scheduler.kubeScheduler.configApiVersion %q: use v1, v1beta3, v1beta2 or v1beta1" $v) -}}
{{- end -}}
{{- else -}}
{{- $kv := include "hami.kubeVersion" . -}}
{{- if semverCompare ">=1.25.0-0" $kv -}}
{{- $v = "v1" -}}
{{- else if semverCompare ">=1.23.0-0" $kv -}}
{{- $v = "v1beta3" -}}
{{- else if semverCompare ">=1.22.0-0" $kv -}}
{{- $v = "v1beta2" -}}
{{- else -}}
{{- $v = "v1beta1" -}}
{{- end -}}
{{- end -}}
{{- printf "kubescheduler.config.k8s.io/%s" $v -}}
{{- end -}}

{{/*
Whether the extender runs its own leader election (--leader-elect).
With the kube-scheduler sidecar, the extender is only ever called over
127.0.0.1 by its own pod's kube-scheduler, whose Lease already makes one
replica the scheduler. A second, independent Lease for the extender could be
won by another pod, and then the scheduling replica's binds would all be
refused; so beside a sidecar with several replicas, kube-scheduler's Lease
alone decides. With one replica both Leases are held by the same pod, and
without a sidecar the extender's Lease is what keeps binds to one replica.
*/}}
{{- define "hami.extender.leaderElect" -}}
{{- if .Values.scheduler.leaderElect -}}
{{- if or (not .Values.scheduler.kubeScheduler.enabled) (le (int .Values.scheduler.replicas) 1) -}}
true
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Port number of an address like ":9395" or "0.0.0.0:9395". */}}
{{- define "hami.port" -}}
{{- $p := regexFind "[0-9]+$" (toString .) -}}
{{- if not $p -}}
{{- fail (printf "%q has no port number" (toString .)) -}}
{{- end -}}
{{- $p -}}
{{- end -}}

{{/*
The webhook/extender certificate, as JSON {ca, crt, key} (base64 PEM).
Made once per render and kept in the top-level object, which Helm shares
between templates, so the Secret, the webhook's caBundle and the pod's
checksum all see the same certificate. On an upgrade the Secret already in
the cluster is reused (lookup), so certificates do not change on every
`helm upgrade`. With scheduler.tls.existingSecret nothing is made.
*/}}
{{- define "hami.tls" -}}
{{- if not (hasKey . "hamiTLS") -}}
{{- $name := include "hami.tls.secretName" . -}}
{{- $found := lookup "v1" "Secret" .Release.Namespace $name -}}
{{- $data := dict -}}
{{- if $found -}}{{- $data = get $found "data" | default dict -}}{{- end -}}
{{- $cert := dict -}}
{{- if and (get $data "ca.crt") (get $data "tls.crt") (get $data "tls.key") -}}
{{- $cert = dict "ca" (get $data "ca.crt") "crt" (get $data "tls.crt") "key" (get $data "tls.key") -}}
{{- else -}}
{{- $svc := include "hami.scheduler.fullname" . -}}
{{- $ns := .Release.Namespace -}}
{{- $days := int .Values.scheduler.tls.certValidityDays -}}
{{- $ca := genCA (printf "%s-ca" $svc) $days -}}
{{- $dns := list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns) -}}
{{- $leaf := genSignedCert (printf "%s.%s.svc" $svc $ns) (list "127.0.0.1") $dns $days $ca -}}
{{- $cert = dict "ca" ($ca.Cert | b64enc) "crt" ($leaf.Cert | b64enc) "key" ($leaf.Key | b64enc) -}}
{{- end -}}
{{- $_ := set . "hamiTLS" $cert -}}
{{- end -}}
{{- toJson (get . "hamiTLS") -}}
{{- end -}}

{{- define "hami.clientTLS.secretName" -}}
{{- default (printf "%s-client-tls" (include "hami.scheduler.fullname" .)) .Values.scheduler.extender.clientAuth.existingSecret -}}
{{- end -}}

{{/*
kube-scheduler's client certificate for the extender and the CA that signed
it, as JSON {ca, crt, key} (base64 PEM), made once per render like hami.tls
and reused from the Secret on upgrade. The CA's key is dropped after
signing: no other certificate can ever verify against this CA. With
scheduler.extender.clientAuth.existingSecret nothing is made.
*/}}
{{- define "hami.clientTLS" -}}
{{- if not (hasKey . "hamiClientTLS") -}}
{{- $name := include "hami.clientTLS.secretName" . -}}
{{- $found := lookup "v1" "Secret" .Release.Namespace $name -}}
{{- $data := dict -}}
{{- if $found -}}{{- $data = get $found "data" | default dict -}}{{- end -}}
{{- $cert := dict -}}
{{- if and (get $data "ca.crt") (get $data "tls.crt") (get $data "tls.key") -}}
{{- $cert = dict "ca" (get $data "ca.crt") "crt" (get $data "tls.crt") "key" (get $data "tls.key") -}}
{{- else -}}
{{- $svc := include "hami.scheduler.fullname" . -}}
{{- $days := int .Values.scheduler.tls.certValidityDays -}}
{{- $ca := genCA (printf "%s-client-ca" $svc) $days -}}
{{- $leaf := genSignedCert "hami-kube-scheduler" (list) (list) $days $ca -}}
{{- $cert = dict "ca" ($ca.Cert | b64enc) "crt" ($leaf.Cert | b64enc) "key" ($leaf.Key | b64enc) -}}
{{- end -}}
{{- $_ := set . "hamiClientTLS" $cert -}}
{{- end -}}
{{- toJson (get . "hamiClientTLS") -}}
{{- end -}}

{{/*
Where the extender's certificate comes from: "chart" (made here, hami.tls),
"certManager" (a cert-manager Certificate writes the Secret and its CA is
injected into the webhook) or "existing" (scheduler.tls.existingSecret).
*/}}
{{- define "hami.tls.mode" -}}
{{- if .Values.scheduler.certManager.enabled -}}
{{- if .Values.scheduler.tls.existingSecret -}}
{{- fail "scheduler.certManager.enabled and scheduler.tls.existingSecret are both set: choose one source of the webhook certificate" -}}
{{- end -}}
certManager
{{- else if .Values.scheduler.tls.existingSecret -}}
existing
{{- else -}}
chart
{{- end -}}
{{- end -}}

{{- define "hami.certManager.certificateName" -}}
{{- printf "%s-serving-cert" (include "hami.scheduler.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The caBundle of the webhook (base64 PEM), or "" when cert-manager injects it. */}}
{{- define "hami.webhook.caBundle" -}}
{{- $mode := include "hami.tls.mode" . -}}
{{- if eq $mode "certManager" -}}
{{- else if eq $mode "existing" -}}
{{- if and (not .Values.scheduler.tls.caBundle) (not (hasKey .Values.scheduler.admissionWebhook.annotations "cert-manager.io/inject-ca-from")) -}}
{{- fail "scheduler.tls.existingSecret is set: also set scheduler.tls.caBundle (base64 PEM of its CA), or the annotation cert-manager.io/inject-ca-from in scheduler.admissionWebhook.annotations" -}}
{{- end -}}
{{- .Values.scheduler.tls.caBundle -}}
{{- else -}}
{{- (include "hami.tls" . | fromJson).ca -}}
{{- end -}}
{{- end -}}

{{/* Flags shared by our daemons' containers need no quoting; values are strings. */}}
{{- define "hami.devicePlugin.disableCoreLimit" -}}
{{- if eq (toString .Values.devicePlugin.disablecorelimit | lower) "true" -}}true{{- else -}}false{{- end -}}
{{- end -}}

{{/* The extender's own Lease; kube-scheduler's is named schedulerName. */}}
{{- define "hami.extender.leaseName" -}}
{{- printf "%s-extender" .Values.schedulerName | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "hami.decisions.secretName" -}}
{{- default (printf "%s-decision-key" (include "hami.fullname" .)) .Values.decisions.existingSecret -}}
{{- end -}}

{{/*
The decision key (base64), made once per render like hami.tls and reused
from the Secret on upgrade: a new key would leave every running pod's
signature unverifiable (uncounted by the scheduler). With
decisions.existingSecret nothing is made.
*/}}
{{- define "hami.decisions.key" -}}
{{- if not (hasKey . "hamiDecisionKey") -}}
{{- $found := lookup "v1" "Secret" .Release.Namespace (include "hami.decisions.secretName" .) -}}
{{- $key := "" -}}
{{- if $found -}}{{- $key = get (get $found "data" | default dict) "key" | default "" -}}{{- end -}}
{{- if not $key -}}{{- $key = randAlphaNum 64 | b64enc -}}{{- end -}}
{{- $_ := set . "hamiDecisionKey" $key -}}
{{- end -}}
{{- get . "hamiDecisionKey" -}}
{{- end -}}

{{/* hami-scheduler's and hami-device-plugin's --trusted-schedulers argument, or "". */}}
{{- define "hami.decisions.trustedArg" -}}
{{- with .Values.decisions.trustedSchedulers -}}
--trusted-schedulers={{ join "," . }}
{{- end -}}
{{- end -}}
