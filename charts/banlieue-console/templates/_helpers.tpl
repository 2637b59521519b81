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
{{- $tag := .Values.image.tag | default .Chart.AppVersion }}
{{- /* A digest alone pins the image by it, with no tag. */}}
{{- .Values.image.repository }}{{ if hasPrefix "@" $tag }}{{ $tag }}{{ else }}:{{ $tag }}{{ end }}
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
{{/*
subjectIssuers / subjectIssuerPrefixes: claimSubjectPolicy's lists with each tenant of
tenants.items added, its issuer allowed and mapped to the prefix `oidc:` (a tenant's
people's claims name them `<tenantId>:<sub>`, and the API server calls them
`oidc:<tenantId>:<sub>`), so tenants sharing an issuer each bind their own people.
*/}}
{{- define "banlieue-console.tenantIssuers" -}}
{{- $issuers := list }}
{{- range .Values.tenants.items }}{{ $issuers = append $issuers .oidc.issuer }}{{ end }}
{{- $issuers | uniq | sortAlpha | toJson }}
{{- end }}

{{- define "banlieue-console.subjectIssuers" -}}
{{ .Values.claimSubjectPolicy.issuers }}
{{ range include "banlieue-console.tenantIssuers" . | fromJsonArray }}{{ . }}
{{ end }}
{{- end }}

{{- define "banlieue-console.subjectIssuerPrefixes" -}}
{{ .Values.claimSubjectPolicy.issuerPrefixes }}
{{ range include "banlieue-console.tenantIssuers" . | fromJsonArray }}{{ . }}=oidc:
{{ end }}
{{- end }}

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
{{- if and .Values.tenants.items (not .Values.tenants.enabled) }}
{{- fail "tenants.items lists ConsoleTenants but tenants.enabled is false: the console would not read them; enable tenants or drop the items" }}
{{- end }}
{{- $tenantIds := list }}
{{- range .Values.tenants.items }}
{{- if has .tenantId $tenantIds }}
{{- fail (printf "tenants.items: the tenantId %s is listed twice" .tenantId) }}
{{- end }}
{{- $tenantIds = append $tenantIds .tenantId }}
{{- end }}
{{- if not (regexMatch "^https://[^/?#@\\s]+/?$" .Values.externalURL) }}
{{- fail (printf "externalURL is %q: it must be https:// and a host (and port) only, no path, query or user: it is the OIDC issuer, and kube-apiserver takes only an https issuer" .Values.externalURL) }}
{{- end }}
{{- include "banlieue-console.checkAuthority" (dict "name" "externalURL" "value" .Values.externalURL) }}
{{- with .Values.kubeconfig.server }}
{{- if not (hasPrefix "https://" .) }}
{{- fail (printf "kubeconfig.server is %q: downloaded kubeconfigs send people's ID tokens to it, so it must be https://" .) }}
{{- end }}
{{- include "banlieue-console.checkAuthority" (dict "name" "kubeconfig.server" "value" .) }}
{{- end }}
{{- range .Values.service.loadBalancerSourceRanges }}
{{- include "banlieue-console.checkRange" (dict "name" "service.loadBalancerSourceRanges" "value" .) }}
{{- end }}
{{- range .Values.trustedProxies }}
{{- include "banlieue-console.checkRange" (dict "name" "trustedProxies" "value" .) }}
{{- end }}
{{- $peers := dict "networkPolicy.ingressFrom" .Values.networkPolicy.ingressFrom "networkPolicy.metricsFrom" .Values.networkPolicy.metricsFrom "networkPolicy.apiServer.to" .Values.networkPolicy.apiServer.to "networkPolicy.postgres.to" .Values.networkPolicy.postgres.to "networkPolicy.dns.to" .Values.networkPolicy.dns.to }}
{{- range $list, $entries := $peers }}
{{- range $entries }}
{{- with .ipBlock }}
{{- include "banlieue-console.checkRange" (dict "name" $list "value" .cidr) }}
{{- if and (eq $list "networkPolicy.metricsFrom") (lt (atoi (last (splitList "/" .cidr))) 8) }}
{{- fail (printf "networkPolicy.metricsFrom: %s is wider than a /8: the metrics port is for the cluster network, not the world (several wide ranges add up to every address); name Prometheus' pods or namespace, or the cluster's pod range" .cidr) }}
{{- end }}
{{- $outer := .cidr }}
{{- range .except }}
{{- include "banlieue-console.checkRange" (dict "name" $list "value" .) }}
{{- include "banlieue-console.checkWithin" (dict "name" $list "inner" . "outer" $outer) }}
{{- end }}
{{- end }}
{{- range $selector := list .podSelector .namespaceSelector }}
{{- with $selector }}{{ include "banlieue-console.checkKeys" (dict "name" $list "map" .matchLabels) }}{{ end }}
{{- end }}
{{- end }}
{{- end }}
{{- range $name, $map := dict "podAnnotations" .Values.podAnnotations "nodeSelector" .Values.nodeSelector "service.annotations" .Values.service.annotations "ingress.annotations" .Values.ingress.annotations }}
{{- include "banlieue-console.checkKeys" (dict "name" $name "map" $map) }}
{{- end }}
{{- range $resource := list "cpu" "memory" "ephemeral-storage" }}
{{- $request := index ($.Values.resources.requests | default dict) $resource }}
{{- $limit := index ($.Values.resources.limits | default dict) $resource }}
{{- if and $request $limit }}
{{- if gt (include "banlieue-console.quantity" $request | float64) (include "banlieue-console.quantity" $limit | float64) }}
{{- fail (printf "resources: the %s request (%v) is above its limit (%v)" $resource $request $limit) }}
{{- end }}
{{- end }}
{{- end }}
{{- with ($.Values.resources.limits | default dict).memory }}
{{- if lt (include "banlieue-console.quantity" . | float64) 134217728.0 }}
{{- fail (printf "resources.limits.memory is %v: each sign-in's argon2id hash takes 64 MiB and two may run at once; give the console at least 128Mi" .) }}
{{- end }}
{{- end }}
{{- if and .Values.service.loadBalancerSourceRanges (ne .Values.service.type "LoadBalancer") }}
{{- fail "service.loadBalancerSourceRanges is set but service.type is not LoadBalancer: only a load balancer applies it" }}
{{- end }}
{{- if and .Values.service.externalTrafficPolicy (eq .Values.service.type "ClusterIP") }}
{{- fail (printf "service.externalTrafficPolicy is %s but service.type is ClusterIP, which has none: set it with NodePort or LoadBalancer only" .Values.service.externalTrafficPolicy) }}
{{- end }}
{{- range splitList "\n" .Values.claimSubjectPolicy.issuerPrefixes }}
{{- $line := trim . }}
{{- if $line }}
{{- if not (contains "=" $line) }}
{{- fail (printf "claimSubjectPolicy.issuerPrefixes: %q is not <issuer>=<prefix>" $line) }}
{{- end }}
{{- $issuer := regexReplaceAll "=[^=]*$" $line "" | trim }}
{{- $prefix := regexReplaceAll "^.*=" $line "" | trim }}
{{- if not $issuer }}
{{- fail (printf "claimSubjectPolicy.issuerPrefixes: %q names no issuer before its =" $line) }}
{{- end }}
{{- if not $prefix }}
{{- fail (printf "claimSubjectPolicy.issuerPrefixes: %s has an empty prefix: any Kubernetes user whose name is a subject id of that issuer could claim as that subject; give the prefix its AuthenticationConfiguration gives" $issuer) }}
{{- end }}
{{- if eq $issuer (include "banlieue-console.issuer" $) }}
{{- fail (printf "claimSubjectPolicy.issuerPrefixes: %s is this console's own issuer (externalURL), whose people are always console:<name>: another prefix for it would refuse every claim they make" $issuer) }}
{{- end }}
{{- if or (hasPrefix "system:" $prefix) (hasPrefix "console:" $prefix) }}
{{- fail (printf "claimSubjectPolicy.issuerPrefixes: %s's prefix %s is reserved (system: is Kubernetes' own identities', console: the console's): the admission policies would treat those identities as that issuer's people" $issuer $prefix) }}
{{- end }}
{{- end }}
{{- end }}
{{- if and .Values.simulatedProvider.enabled (not .Values.runControllers) }}
{{- fail "simulatedProvider.enabled needs runControllers: the simulated provider runs with the controllers" }}
{{- end }}
{{- if and .Values.kubeconfig.certificateAuthority (not .Values.kubeconfig.server) }}
{{- fail "kubeconfig.certificateAuthority is set without kubeconfig.server: the CA is embedded in downloaded kubeconfigs for that server; set it too" }}
{{- end }}
{{- with .Values.kubeconfig.certificateAuthority }}
{{- include "banlieue-console.checkCertificates" (dict "name" "kubeconfig.certificateAuthority" "value" .) }}
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
Fails unless .value (setting .name) is one or more whole PEM certificates: each block's
base64 decodes to exactly the DER length its outer SEQUENCE states, so a truncated or
placeholder certificate is refused here rather than by the console at start.
*/}}
{{- define "banlieue-console.checkCertificates" -}}
{{- $blocks := regexFindAll "-----BEGIN CERTIFICATE-----[^-]*-----END CERTIFICATE-----" .value -1 }}
{{- if not $blocks }}
{{- fail (printf "%s holds no PEM certificate (-----BEGIN CERTIFICATE----- … -----END CERTIFICATE-----)" .name) }}
{{- end }}
{{- if regexMatch "\\S" (regexReplaceAll "-----BEGIN CERTIFICATE-----[^-]*-----END CERTIFICATE-----" .value "") }}
{{- fail (printf "%s has text outside its PEM certificates" .name) }}
{{- end }}
{{- range $index, $block := $blocks }}
{{- $body := regexReplaceAll "\\s" (trimSuffix "-----END CERTIFICATE-----" (trimPrefix "-----BEGIN CERTIFICATE-----" $block)) "" }}
{{- if or (not (regexMatch "^[A-Za-z0-9+/]+={0,2}$" $body)) (ne (mod (len $body) 4) 0) }}
{{- fail (printf "%s: certificate %d is not base64" $.name (add1 $index)) }}
{{- end }}
{{- $der := printf "%x" (b64dec $body) }}
{{- $size := div (len $der) 2 }}
{{- $stated := -1 }}
{{- if and (ge $size 2) (hasPrefix "30" $der) }}
{{- $first := int (printf "0x%s" (substr 2 4 $der)) }}
{{- if lt $first 128 }}
{{- $stated = add 2 $first }}
{{- else if and (le $first 131) (ge $size (add 2 (sub $first 128))) }}
{{- $digits := mul 2 (sub $first 128) }}
{{- $stated = add 2 (sub $first 128) (int (printf "0x%s" (substr 4 (int (add 4 $digits)) $der))) }}
{{- end }}
{{- end }}
{{- if ne $stated $size }}
{{- fail (printf "%s: certificate %d is not a whole DER certificate (%d bytes, cut short or a placeholder): paste the CA's whole PEM" $.name (add1 $index) $size) }}
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
{{- if hasPrefix "[" $host }}
{{- if not (regexMatch (printf "^\\[%s\\]$" (include "banlieue-console.ipv6Pattern" .)) $host) }}
{{- fail (printf "%s is %q: %s is not an IPv6 address" .name .value $host) }}
{{- end }}
{{- else if regexMatch "(^|\\.)[0-9]+\\.?$" $host }}
{{- /* A last label of digits makes the host an IPv4 address to a URL parser. */}}
{{- $octets := splitList "." $host }}
{{- if ne (len $octets) 4 }}
{{- fail (printf "%s is %q: %s is not an IPv4 address (four numbers from 0 to 255)" .name .value $host) }}
{{- end }}
{{- range $octets }}
{{- if or (not (regexMatch "^[0-9]{1,3}$" .)) (gt (atoi .) 255) }}
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
Fails when the IPv4 range .value (of setting .name; its syntax checked by the schema)
has bits set past its prefix, as 10.0.0.1/8: the console (trustedProxies) would refuse
to start rather than guess whether the range (10.0.0.0/8) or the address (10.0.0.1/32)
was meant, and a NetworkPolicy would hold an ambiguous range. IPv6 ranges are checked by
the console at start, and by the API server.
*/}}
{{- define "banlieue-console.checkRange" -}}
{{- $range := .value }}
{{- if regexMatch "^[0-9.]+/[0-9]+$" $range }}
{{- $parts := splitList "/" $range }}
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
{{- fail (printf "%s: %s has bits set past its /%s prefix: write the range as %s/%s, or the one address as %s/32" .name $range (last $parts) $first (last $parts) (first $parts)) }}
{{- end }}
{{- end }}
{{- end }}

{{/* The IPv6 address syntax (RFC 4291 §2.2, without an embedded IPv4 part). */}}
{{- define "banlieue-console.ipv6Pattern" -}}
(([0-9a-fA-F]{1,4}:){7}[0-9a-fA-F]{1,4}|([0-9a-fA-F]{1,4}:){1,7}:|([0-9a-fA-F]{1,4}:){1,6}:[0-9a-fA-F]{1,4}|([0-9a-fA-F]{1,4}:){1,5}(:[0-9a-fA-F]{1,4}){1,2}|([0-9a-fA-F]{1,4}:){1,4}(:[0-9a-fA-F]{1,4}){1,3}|([0-9a-fA-F]{1,4}:){1,3}(:[0-9a-fA-F]{1,4}){1,4}|([0-9a-fA-F]{1,4}:){1,2}(:[0-9a-fA-F]{1,4}){1,5}|[0-9a-fA-F]{1,4}:((:[0-9a-fA-F]{1,4}){1,6})|:((:[0-9a-fA-F]{1,4}){1,7}|:))
{{- end }}

{{/* The IPv4 address . as a number. */}}
{{- define "banlieue-console.ipv4Number" -}}
{{- $number := 0 }}
{{- range splitList "." . }}{{ $number = add (mul $number 256) (atoi .) }}{{ end }}
{{- $number }}
{{- end }}

{{/*
Fails unless the IPv4 range .inner (an ipBlock's except entry) lies strictly inside
.outer (its cidr), as the API server requires. IPv6 pairs are left to the API server.
*/}}
{{- define "banlieue-console.checkWithin" -}}
{{- if and (regexMatch "^[0-9.]+/[0-9]+$" .inner) (regexMatch "^[0-9.]+/[0-9]+$" .outer) }}
{{- $inner := splitList "/" .inner }}
{{- $outer := splitList "/" .outer }}
{{- $block := 1 }}
{{- range until (sub 32 (atoi (last $outer)) | int) }}{{ $block = mul $block 2 }}{{ end }}
{{- $start := include "banlieue-console.ipv4Number" (first $outer) | atoi }}
{{- $address := include "banlieue-console.ipv4Number" (first $inner) | atoi }}
{{- if or (le (atoi (last $inner)) (atoi (last $outer))) (lt $address $start) (ge $address (add $start $block)) }}
{{- fail (printf "%s: the except range %s is not strictly inside its cidr %s" .name .inner .outer) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Fails when a key of the labels or annotations .map (setting .name) has a prefix longer
than 253 characters (the schema checks the rest of its form).
*/}}
{{- define "banlieue-console.checkKeys" -}}
{{- range $key, $_ := .map }}
{{- if and (contains "/" $key) (gt (len (first (splitList "/" $key))) 253) }}
{{- fail (printf "%s: the key %s... has a prefix longer than 253 characters" $.name (trunc 40 $key)) }}
{{- end }}
{{- end }}
{{- end }}

{{/* The Kubernetes quantity . (100m, 1.5Gi, 2) as a number. */}}
{{- define "banlieue-console.quantity" -}}
{{- $quantity := toString . }}
{{- $number := regexFind "^[0-9]*\\.?[0-9]*" $quantity }}
{{- $factors := dict "" 1.0 "m" 0.001 "k" 1000.0 "M" 1000000.0 "G" 1000000000.0 "T" 1000000000000.0 "P" 1000000000000000.0 "E" 1000000000000000000.0 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "Pi" 1125899906842624.0 "Ei" 1152921504606846976.0 }}
{{- mulf (float64 $number) (get $factors (trimPrefix $number $quantity)) }}
{{- end }}

{{/*
The resourceNames of an impersonator list (.role): the chart's own (.names), then the
console:* names the console has added to the live list since (users and custom roles
it keeps impersonable), so an upgrade or reinstall does not take them away until the
console's next sync. Without a cluster (helm template) the chart's own alone.
*/}}
{{- define "banlieue-console.keptNames" -}}
{{- $names := .names }}
{{- with lookup "rbac.authorization.k8s.io/v1" "ClusterRole" "" .role }}
{{- range .rules }}{{ range .resourceNames }}{{ if hasPrefix "console:" . }}{{ $names = append $names . }}{{ end }}{{ end }}{{ end }}
{{- end }}
{{- range uniq $names }}
- {{ . | quote }}
{{- end }}
{{- end }}
