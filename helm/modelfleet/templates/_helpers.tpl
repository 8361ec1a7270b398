{{/* Names and labels shared by every object of the chart. */}}

{{- define "modelfleet.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "modelfleet.operatorName" -}}
{{- printf "%s-operator" (include "modelfleet.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "modelfleet.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "modelfleet.operatorName" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The ClusterRole the operator binds routers' ServiceAccounts to (--router-cluster-role). */}}
{{- define "modelfleet.routerClusterRole" -}}
{{- default (printf "%s-router" .Release.Name | trunc 63 | trimSuffix "-") .Values.router.clusterRoleName -}}
{{- end -}}

{{- define "modelfleet.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/part-of: modelfleet
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "modelfleet.operatorSelectorLabels" -}}
app.kubernetes.io/name: modelfleet-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "modelfleet.operatorLabels" -}}
{{ include "modelfleet.labels" . }}
app.kubernetes.io/name: modelfleet-operator
app.kubernetes.io/component: operator
{{- end -}}

{{/*
An image reference: (dict "root" $ "name" "operator") -> [registry/]repository:tag, the tag
defaulting to the chart's appVersion.
*/}}
{{- define "modelfleet.image" -}}
{{- $image := .root.Values.image -}}
{{- $repository := required (printf "image.repositories.%s is required" .name) (get $image.repositories .name) -}}
{{- $tag := default .root.Chart.AppVersion $image.tag -}}
{{- if $image.registry -}}
{{- printf "%s/%s:%s" (trimSuffix "/" $image.registry) $repository $tag -}}
{{- else -}}
{{- printf "%s:%s" $repository $tag -}}
{{- end -}}
{{- end -}}
