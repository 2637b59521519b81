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
{{- include "banlieue-console.checkAuthority" (dict "name" "externalURL" "value" .Values.externalURL) }}
{{- with .Values.kubeconfig.server }}
{{- include "banlieue-console.checkAuthority" (dict "name" "kubeconfig.server" "value" .) }}
{{- end }}
{{- range .Values.trustedProxies }}
{{- include "banlieue-console.checkRange" . }}
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

{{/*
Fails unless the URL .value (setting .name) has a host the console can parse: a DNS name,
an IPv4 address or a bracketed IPv6 one, with an optional port from 1 to 65535.
*/}}
{{- define "banlieue-console.checkAuthority" -}}
{{- $authority := regexReplaceAll "^[A-Za-z][-+.A-Za-z0-9]*://([^/?#]*).*$" .value "${1}" }}
{{- if not (regexMatch "^([A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?(\\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)*|\\[[0-9A-Fa-f:.]+\\])(:[0-9]{1,5})?$" $authority) }}
{{- fail (printf "%s is %q: after the scheme comes a host (a DNS name, an IPv4 address or a bracketed IPv6 one) and an optional port" .name .value) }}
{{- end }}
{{- $host := regexReplaceAll ":[0-9]+$" $authority "" }}
{{- if regexMatch "^[0-9.]+$" $host }}
{{- $octets := splitList "." $host }}
{{- if ne (len $octets) 4 }}
{{- fail (printf "%s is %q: %s is not an IPv4 address (four numbers from 0 to 255)" .name .value $host) }}
{{- end }}
{{- range $octets }}
{{- if or (eq . "") (gt (atoi .) 255) }}
{{- fail (printf "%s is %q: %s is not an IPv4 address (four numbers from 0 to 255)" $.name $.value $host) }}
{{- end }}
{{- end }}
{{- end }}
{{- $port := regexFind ":[0-9]+$" $authority | trimPrefix ":" }}
{{- if and $port (or (lt (atoi $port) 1) (gt (atoi $port) 65535)) }}
{{- fail (printf "%s is %q: port %s is not from 1 to 65535" .name .value $port) }}
{{- end }}
{{- end }}

{{/*
Fails when the IPv4 range . (a trustedProxies entry, its syntax checked by the schema)
has bits set past its prefix, as 10.0.0.1/8: the console would refuse to start, not
guess whether the range (10.0.0.0/8) or the address (10.0.0.1/32) was meant. IPv6
ranges are checked by the console at start.
*/}}
{{- define "banlieue-console.checkRange" -}}
{{- if regexMatch "^[0-9.]+/[0-9]+$" . }}
{{- $parts := splitList "/" . }}
{{- $address := 0 }}
{{- range splitList "." (first $parts) }}
{{- $address = add (mul $address 256) (atoi .) }}
{{- end }}
{{- $block := 1 }}
{{- range until (sub 32 (atoi (last $parts)) | int) }}
{{- $block = mul $block 2 }}
{{- end }}
{{- if ne (mod $address $block) 0 }}
{{- $network := sub $address (mod $address $block) }}
{{- $first := printf "%d.%d.%d.%d" (div $network 16777216) (mod (div $network 65536) 256) (mod (div $network 256) 256) (mod $network 256) }}
{{- fail (printf "trustedProxies: %s has bits set past its /%s prefix: write the range as %s/%s, or the one address as %s/32" . (last $parts) $first (last $parts) (first $parts)) }}
{{- end }}
{{- end }}
{{- end }}
