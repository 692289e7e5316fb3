{{- define "hello.selector" -}}
app.kubernetes.io/name: hello
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "hello.labels" -}}
{{ include "hello.selector" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/* The compute nodes: plinth.nodeSelectors.compute when the system overrides
set it (OpenStack-Helm's form: node_selector_key and node_selector_value), else
the chart's nodeSelector. */}}
{{- define "hello.nodeSelector" -}}
{{- $sel := .Values.nodeSelector -}}
{{- with .Values.plinth -}}{{- with .nodeSelectors -}}{{- with .compute -}}
{{- if not (and (kindIs "map" .) (hasKey . "node_selector_key")) -}}
{{- fail (printf "plinth.nodeSelectors.compute is %v, want {node_selector_key: LABEL, node_selector_value: VALUE}" .) -}}
{{- end -}}
{{- $sel = dict .node_selector_key (.node_selector_value | default "enabled") -}}
{{- end -}}{{- end -}}{{- end -}}
{{- if not $sel -}}
{{- fail "nodeSelector is empty: the hello pods would run on any node (set nodeSelector or plinth.nodeSelectors.compute)" -}}
{{- end -}}
{{- toYaml $sel -}}
{{- end }}
