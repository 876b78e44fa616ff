{{/*
Values of upstream HAMi's chart (v2.10) that this chart does not use. An
operator may install with upstream's values.yaml: nothing in it is ignored
silently. Each key below that is present is named in NOTES (why it is not
needed), and a value that would change the install if ignored fails the
render with what to do instead. Keys this chart supports keep upstream's
shape and meaning and are not listed here (docs/install.md, "Installing with
upstream's values", points here).

Returns JSON: a list of "key: why" lines. Called by NOTES.txt and (for the
fails) by device-config.yaml.
*/}}
{{- define "hami.upstream.review" -}}
{{- $v := .Values -}}
{{- $notes := list -}}
{{- $unsupported := "not supported by this chart, which schedules NVIDIA GPUs only" -}}

{{- /* Other vendors' resource names. */ -}}
{{- $vendorKeys := list -}}
{{- range list "mluResourceName" "mluResourceMem" "mluResourceCores" "dcuResourceName" "dcuResourceMem" "dcuResourceCores" "metaxResourceName" "metaxResourceCore" "metaxResourceMem" "metaxsGPUTopologyAware" "enflameResourceNameDRSGCU" "enflameResourceNameGCUMemory" "enflameResourceNameGCUCore" "kunlunResourceName" "kunlunResourceVCountName" "kunlunResourceVMemoryName" "vastaiResourceName" "birenResourceName" -}}
{{- if hasKey $v . }}{{ $vendorKeys = append $vendorKeys . }}{{ end -}}
{{- end -}}
{{- with $vendorKeys }}{{ $notes = append $notes (printf "%s: other vendors' resource names, %s" (join ", " .) $unsupported) }}{{ end -}}

{{- /* devices.<vendor>: NVIDIA only; enabling a vendor that needs its own daemons fails. */ -}}
{{- $vendors := list -}}
{{- range $name, $dev := ($v.devices | default dict) -}}
{{- if ne $name "nvidia" -}}
{{- if and (has $name (list "ascend" "iluvatar")) (kindIs "map" $dev) (get $dev "enabled") -}}
{{- fail (printf "devices.%s.enabled=true: %s devices are %s; set it to false" $name $name $unsupported) -}}
{{- end -}}
{{- $vendors = append $vendors (printf "devices.%s.*" $name) -}}
{{- end -}}
{{- end -}}
{{- with $vendors }}{{ $notes = append $notes (printf "%s: %s" (join ", " .) $unsupported) }}{{ end -}}

{{- with $v.global -}}
{{- if get . "managedNodeSelectorEnable" -}}
{{- fail "global.managedNodeSelectorEnable=true is not supported (upstream only sets NODE_SELECTOR_* env on its scheduler); to keep GPU pods on some nodes use the pods' nodeSelector" -}}
{{- end -}}
{{- if or (hasKey . "managedNodeSelectorEnable") (hasKey . "managedNodeSelector") -}}
{{- $notes = append $notes "global.managedNodeSelectorEnable, global.managedNodeSelector: not used (upstream passes them as NODE_SELECTOR_* env, which nothing reads)" -}}
{{- end -}}
{{- end -}}

{{- if hasKey $v "namespaceOverride" -}}
{{- if $v.namespaceOverride }}{{ fail (printf "namespaceOverride=%s is not supported: install the release into that namespace (helm --namespace %s)" $v.namespaceOverride $v.namespaceOverride) }}{{ end -}}
{{- $notes = append $notes "namespaceOverride: not used; everything goes into the release namespace" -}}
{{- end -}}

{{- with get $v "podSecurityPolicy" -}}
{{- if get . "enabled" }}{{ fail "podSecurityPolicy.enabled=true is not supported (PodSecurityPolicy was removed in Kubernetes 1.25); set it to false" }}{{ end -}}
{{- $notes = append $notes "podSecurityPolicy.*: no PodSecurityPolicy is made" -}}
{{- end -}}

{{- with get $v "mockDevicePlugin" -}}
{{- if get . "enabled" }}{{ fail "mockDevicePlugin.enabled=true is not supported: this chart has no mock device plugin" }}{{ end -}}
{{- $notes = append $notes "mockDevicePlugin.*: no mock device plugin is installed" -}}
{{- end -}}

{{- $s := $v.scheduler -}}
{{- if get $s "nodeLabelSelector" -}}
{{- fail "scheduler.nodeLabelSelector is not supported: hami-scheduler has no --node-label-selector; restrict GPU nodes with devicePlugin.nvidiaNodeSelector" -}}
{{- end -}}
{{- if hasKey $s "livenessProbe" -}}
{{- $notes = append $notes "scheduler.livenessProbe: not used; the extender and kube-scheduler are always probed" -}}
{{- end -}}
{{- with get $s "patch" -}}
{{- $notes = append $notes "scheduler.patch.*: not used; no certificate Job runs, the chart makes the webhook certificate itself (or cert-manager does, scheduler.certManager.enabled)" -}}
{{- end -}}
{{- with get $s.admissionWebhook "customURL" -}}
{{- if get . "enabled" }}{{ fail "scheduler.admissionWebhook.customURL.enabled=true is not supported: the webhook is called through the scheduler's Service" }}{{ end -}}
{{- $notes = append $notes "scheduler.admissionWebhook.customURL.*: not used; the webhook is called through the scheduler's Service" -}}
{{- end -}}
{{- if hasKey $s.admissionWebhook "manageNamespaceSelector" -}}
{{- if not $s.admissionWebhook.manageNamespaceSelector }}{{ fail "scheduler.admissionWebhook.manageNamespaceSelector=false is not supported: the chart always sets the webhook's namespaceSelector" }}{{ end -}}
{{- $notes = append $notes "scheduler.admissionWebhook.manageNamespaceSelector: not used; the chart always sets the namespaceSelector" -}}
{{- end -}}
{{- range list "httpTargetPort" "monitorTargetPort" -}}
{{- if hasKey $s.service . }}{{ $notes = append $notes (printf "scheduler.service.%s: not used; the Service targets the extender's ports by name (scheduler.extender.port, scheduler.metricsBindAddress)" .) }}{{ end -}}
{{- end -}}

{{- $dp := $v.devicePlugin -}}
{{- $vgpu := printf "%s/vgpu" (trimSuffix "/" $v.global.gpuHookPath) -}}
{{- if hasKey $dp "enabled" -}}
{{- if not $dp.enabled }}{{ fail "devicePlugin.enabled=false is not supported: this chart always installs the device plugin and node agent" }}{{ end -}}
{{- $notes = append $notes "devicePlugin.enabled: not used; the device plugin is always installed" -}}
{{- end -}}
{{- with get $dp "gpuOperatorToolkitReady" -}}
{{- if get . "enabled" }}{{ fail "devicePlugin.gpuOperatorToolkitReady.enabled=true is not supported: the device plugin does not wait for the GPU operator's toolkit" }}{{ end -}}
{{- $notes = append $notes "devicePlugin.gpuOperatorToolkitReady.*: not used (no wait for the GPU operator's toolkit)" -}}
{{- end -}}
{{- if hasKey $dp "preConfiguredDeviceMemory" -}}
{{- if $dp.preConfiguredDeviceMemory }}{{ fail "devicePlugin.preConfiguredDeviceMemory is not supported: the device plugin reads each GPU's memory from NVML; set it to 0" }}{{ end -}}
{{- $notes = append $notes "devicePlugin.preConfiguredDeviceMemory: not used (0: memory is read from NVML)" -}}
{{- end -}}
{{- if hasKey $dp "passDeviceSpecsEnabled" -}}
{{- if $dp.passDeviceSpecsEnabled }}{{ fail "devicePlugin.passDeviceSpecsEnabled=true is not supported: the device plugin hands GPUs to the NVIDIA runtime through NVIDIA_VISIBLE_DEVICES only" }}{{ end -}}
{{- $notes = append $notes "devicePlugin.passDeviceSpecsEnabled: not used (false is this chart's behaviour)" -}}
{{- end -}}
{{- range list "gdrcopyEnabled" "gdsEnabled" "mofedEnabled" -}}
{{- if and (hasKey $dp .) (not (kindIs "invalid" (get $dp .))) -}}
{{- fail (printf "devicePlugin.%s is not supported (no GDRCopy, GDS or MOFED in this device plugin); remove it" .) -}}
{{- end -}}
{{- end -}}
{{- if hasKey $dp "libPath" -}}
{{- if ne (trimSuffix "/" (toString $dp.libPath)) $vgpu }}{{ fail (printf "devicePlugin.libPath=%s: this chart keeps libvgpu.so in <global.gpuHookPath>/vgpu (%s); set global.gpuHookPath instead" (toString $dp.libPath) $vgpu) }}{{ end -}}
{{- $notes = append $notes (printf "devicePlugin.libPath: not used; it is <global.gpuHookPath>/vgpu (%s)" $vgpu) -}}
{{- end -}}
{{- if hasKey $dp.monitor "ctrPath" -}}
{{- if ne (trimSuffix "/" (toString $dp.monitor.ctrPath)) (printf "%s/containers" $vgpu) }}{{ fail (printf "devicePlugin.monitor.ctrPath=%s: this chart keeps container state in <global.gpuHookPath>/vgpu/containers (%s/containers); set global.gpuHookPath instead" (toString $dp.monitor.ctrPath) $vgpu) }}{{ end -}}
{{- $notes = append $notes (printf "devicePlugin.monitor.ctrPath: not used; it is <global.gpuHookPath>/vgpu/containers (%s/containers)" $vgpu) -}}
{{- end -}}
{{- if hasKey $dp "hostPID" -}}
{{- if not $dp.hostPID }}{{ fail "devicePlugin.hostPID=false is not supported: the node agent maps containers' processes to host PIDs" }}{{ end -}}
{{- $notes = append $notes "devicePlugin.hostPID: not used; the DaemonSet always runs with hostPID" -}}
{{- end -}}
{{- if hasKey $dp "hostNetwork" -}}
{{- if $dp.hostNetwork }}{{ fail "devicePlugin.hostNetwork=true is not supported" }}{{ end -}}
{{- $notes = append $notes "devicePlugin.hostNetwork: not used (false is this chart's behaviour)" -}}
{{- end -}}

{{- /* Upstream's images do not hold our binaries (hami.image replaces them). */ -}}
{{- range $key, $img := dict "scheduler.extender.image" $s.extender.image "devicePlugin.image" $dp.image "devicePlugin.monitor.image" $dp.monitor.image -}}
{{- if and (kindIs "map" $img) (eq (trimPrefix "docker.io/" (toString (get $img "repository"))) (include "hami.upstreamImages" .)) -}}
{{- $notes = append $notes (printf "%s: %s is upstream HAMi's image, without this chart's binaries; this chart's image is used instead at its own version (set %s.repository and .tag to where you pushed it)" $key (get $img "repository") $key) -}}
{{- end -}}
{{- end -}}
{{- toJson $notes -}}
{{- end -}}
