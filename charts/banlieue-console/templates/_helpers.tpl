{{/*
Shared pieces of the console's workload (deployment.yaml and its neighbours). The RBAC,
policies and roles keep the fixed names the console looks them up by; the workload's
objects are all named `banlieue-console` (the ServiceAccount the RBAC binds) or
`banlieue-console-<what>`, and carry these labels.
*/}}

{{/* Labels of every workload object. */}}
{{- define "banlieue-console.labels" -}}
{{ include "banlieue-console.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/* The labels that select the console's pods (Deployment, Service, PDB, NetworkPolicy). */}}
{{- define "banlieue-console.selectorLabels" -}}
app.kubernetes.io/name: banlieue-console
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The container image: repository:tag, the tag defaulting to the chart's appVersion. */}}
{{- define "banlieue-console.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The name of the console's port: https when it serves TLS itself, else http. */}}
{{- define "banlieue-console.portName" -}}
{{ if .Values.tls.secretName }}https{{ else }}http{{ end }}
{{- end }}

{{/* The issuer URL as the console uses it (BANLIEUE_EXTERNAL_URL without a trailing /). */}}
{{- define "banlieue-console.issuer" -}}
{{ trimSuffix "/" .Values.externalURL }}
{{- end }}

{{/*
The claimSubjectPolicy values as the admission policies' CEL reads them, written into the
policies themselves (a policy with a parameter object denies everything while that object
is missing, as during `helm uninstall`, and kube-apiserver can lose track of a re-created
one: kubernetes/kubernetes#130887). JSON's string and list syntax is CEL's.
celEntries: a multi-line value as a list of its entries, trimmed, blank lines dropped.
celIssuerPrefixes: the `<issuer>=<prefix>` lines of issuerPrefixes as [issuer, prefix]
pairs, split at the last `=`, each side trimmed; lines without `=` dropped.
cluster::chart::manifests writes the same lists for the in-process install.
*/}}
{{- define "banlieue-console.celEntries" -}}
{{- $entries := list }}
{{- range splitList "\n" . }}{{ if trim . }}{{ $entries = append $entries (trim .) }}{{ end }}{{ end }}
{{- $entries | toJson | toJson }}
{{- end }}

{{- define "banlieue-console.celIssuerPrefixes" -}}
{{- $pairs := list }}
{{- range splitList "\n" . }}{{ if contains "=" . }}
{{- $pairs = append $pairs (list (regexReplaceAll "=[^=]*$" . "" | trim) (regexReplaceAll "^.*=" . "" | trim)) }}
{{- end }}{{ end }}
{{- $pairs | toJson | toJson }}
{{- end }}

{{/*
What values.schema.json cannot say, or cannot say why: the form of externalURL and the
combinations the console would refuse at start, each refused here with its reason (a
schema only names the rule that failed).
*/}}
{{- define "banlieue-console.validate" -}}
{{- if not (regexMatch "^https://[^/?#@\\s]+/?$" .Values.externalURL) }}
{{- fail (printf "externalURL is %q: it must be https:// and a host (and port) only, no path, query or user: it is the OIDC issuer, and kube-apiserver takes only an https issuer" .Values.externalURL) }}
{{- end }}
{{- if and .Values.kubeconfig.certificateAuthority (not .Values.kubeconfig.server) }}
{{- fail "kubeconfig.certificateAuthority is set without kubeconfig.server: the CA is embedded in downloaded kubeconfigs for that server; set it too" }}
{{- end }}
{{- if and (eq .Values.database.type "sqlite") (gt (int .Values.replicas) 1) }}
{{- fail (printf "replicas is %d but database.type is sqlite: one process owns a SQLite file; use database.type: postgres for more than one replica" (int .Values.replicas)) }}
{{- end }}
{{- if and (eq .Values.database.type "postgres") (not .Values.database.postgres.urlSecret.name) }}
{{- fail "database.type is postgres: set database.postgres.urlSecret.name, the Secret holding the postgres:// URL" }}
{{- end }}
{{- if and (eq .Values.database.type "postgres") (not .Values.keyEncryption.secretName) }}
{{- fail "database.type is postgres: set keyEncryption.secretName (the console requires a key-encryption key file with PostgreSQL)" }}
{{- end }}
{{- if and .Values.tls.secretName (not (hasPrefix "https://" .Values.externalURL)) }}
{{- fail (printf "tls.secretName is set, so the console serves HTTPS only: externalURL must be https://, not %s" .Values.externalURL) }}
{{- end }}
{{- if eq (int .Values.metricsPort) (int .Values.containerPort) }}
{{- fail (printf "metricsPort and containerPort are both %d: the metrics listener needs a port of its own" (int .Values.containerPort)) }}
{{- end }}
{{- if eq (int .Values.service.port) (int .Values.metricsPort) }}
{{- fail (printf "service.port and metricsPort are both %d: the Service's console and metrics ports must differ" (int .Values.metricsPort)) }}
{{- end }}
{{- if .Values.ingress.enabled }}
{{- $host := (urlParse .Values.externalURL).host }}
{{- if contains ":" $host }}
{{- fail (printf "ingress.enabled: the Ingress host is externalURL's, which must then have no port (%s)" .Values.externalURL) }}
{{- end }}
{{- if or (not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$" $host)) (regexMatch "^[0-9.]+$" $host) }}
{{- fail (printf "ingress.enabled: the Ingress host is externalURL's (%s), which must then be a lower-case DNS name, not an IP address: Kubernetes refuses other Ingress hosts" $host) }}
{{- end }}
{{- end }}
{{- end }}
