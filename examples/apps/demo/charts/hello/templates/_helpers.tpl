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
set it, else the chart's nodeSelector. */}}
{{- define "hello.nodeSelector" -}}
{{- $sel := .Values.nodeSelector -}}
{{- with .Values.plinth -}}{{- with .nodeSelectors -}}{{- with .compute -}}
{{- if not (kindIs "map" .) -}}
{{- fail (printf "plinth.nodeSelectors.compute is %s, want a map of node label to value" (kindOf .)) -}}
{{- end -}}
{{- $sel = . -}}
{{- end -}}{{- end -}}{{- end -}}
{{- if not $sel -}}
{{- fail "nodeSelector is empty: the hello pods would run on any node (set nodeSelector or plinth.nodeSelectors.compute)" -}}
{{- end -}}
{{- toYaml $sel -}}
{{- end }}
