{{- define "mcp-resume.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "mcp-resume.fullname" -}}
{{- $name := "" }}
{{- if .Values.fullnameOverride }}
{{- $name = .Values.fullnameOverride }}
{{- else if contains (include "mcp-resume.name" .) .Release.Name }}
{{- $name = .Release.Name }}
{{- else }}
{{- $name = printf "%s-%s" .Release.Name (include "mcp-resume.name" .) }}
{{- end }}
{{- if contains "." $name }}
{{- fail (printf "the name %q has a dot: pod names become --instance, which takes letters, digits, - and _ (set fullnameOverride)" $name) }}
{{- end }}
{{- $name | trunc 52 | trimSuffix "-" }}
{{- end }}

{{- define "mcp-resume.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mcp-resume.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "mcp-resume.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "mcp-resume.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | trunc 63 | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "mcp-resume.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/* The Secret holding the API keys file, if any. */}}
{{- define "mcp-resume.keysSecret" -}}
{{- if .Values.auth.apiKeys.existingSecret }}
{{- .Values.auth.apiKeys.existingSecret }}
{{- else if .Values.auth.apiKeys.keys }}
{{- printf "%s-api-keys" (include "mcp-resume.fullname" .) }}
{{- end }}
{{- end }}

{{/* The Secret holding the OAuth client secret, if any. */}}
{{- define "mcp-resume.oauthSecret" -}}
{{- if .Values.auth.oauth.existingSecret }}
{{- .Values.auth.oauth.existingSecret }}
{{- else if .Values.auth.oauth.clientSecret }}
{{- printf "%s-oauth" (include "mcp-resume.fullname" .) }}
{{- end }}
{{- end }}

{{/* terminationGracePeriodSeconds: the preStop sleep, the drain, and 10 s to exit. */}}
{{- define "mcp-resume.grace" -}}
{{- add .Values.preStopSleepSeconds .Values.drainGrace 10 }}
{{- end }}
