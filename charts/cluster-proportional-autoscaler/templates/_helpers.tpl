{{/*
Expand the name of the chart.
*/}}
{{- define "cluster-proportional-autoscaler.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Fully qualified app name (also the ConfigMap name passed as --configmap).
If the release name contains the chart name it is used as the full name.
*/}}
{{- define "cluster-proportional-autoscaler.fullname" -}}
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

{{- define "cluster-proportional-autoscaler.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Namespace of every namespaced object: options.namespace, else the release namespace.
*/}}
{{- define "cluster-proportional-autoscaler.namespace" -}}
{{- default .Release.Namespace .Values.options.namespace -}}
{{- end -}}

{{- define "cluster-proportional-autoscaler.labels" -}}
helm.sh/chart: {{ include "cluster-proportional-autoscaler.chart" . }}
{{ include "cluster-proportional-autoscaler.selectorLabels" . }}
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "cluster-proportional-autoscaler.selectorLabels" -}}
app.kubernetes.io/name: {{ include "cluster-proportional-autoscaler.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "cluster-proportional-autoscaler.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "cluster-proportional-autoscaler.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
options.target, validated: a comma list of kind/name with a kind the autoscaler accepts
(case-insensitive, as the binary lower-cases it). Rendered unchanged.
*/}}
{{- define "cluster-proportional-autoscaler.target" -}}
{{- $target := toString (required "options.target must be specified" .Values.options.target) -}}
{{- range $t := splitList "," (lower $target) -}}
{{- if not (regexMatch "^(deployment|replicaset|replicationcontroller|statefulset)/[^/\\s]+$" (trim $t)) -}}
{{- fail (printf "options.target: %q must be kind/name with kind deployment, replicaset, replicationcontroller or statefulset" (trim $t)) -}}
{{- end -}}
{{- end -}}
{{- $target -}}
{{- end -}}

{{/*
"true" when the Role must also grant statefulsets/scale.
*/}}
{{/*
(ours) pods list for the load axis: rbac.pods, or a load key with the Pods source (no
prometheus) in config.linear or config.ladder.
*/}}
{{- define "cluster-proportional-autoscaler.loadPods" -}}
{{- $on := .Values.rbac.pods -}}
{{- range $mode := list "linear" "ladder" -}}
{{- $params := index ($.Values.config | default dict) $mode -}}
{{- if and (kindIs "map" $params) (kindIs "map" (index ($params | default dict) "load")) -}}
{{- if not (index $params.load "prometheus") -}}{{- $on = true -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- if $on -}}
true
{{- end -}}
{{- end -}}

{{- define "cluster-proportional-autoscaler.statefulSets" -}}
{{- if or .Values.rbac.statefulSets (contains "statefulset/" (lower (toString .Values.options.target))) -}}
true
{{- end -}}
{{- end -}}

{{/*
options.nodeLabels as a label selector: k1=v1,k2=v2 (keys sorted).
*/}}
{{- define "cluster-proportional-autoscaler.nodeLabels" -}}
{{- $labels := list -}}
{{- range $k, $v := .Values.options.nodeLabels -}}
{{- $labels = append $labels (printf "%s=%v" $k $v) -}}
{{- end -}}
{{- join "," $labels -}}
{{- end -}}

{{/*
A parameter block as compact JSON: a map is encoded, a string is taken as JSON already.
*/}}
{{- define "cluster-proportional-autoscaler.json" -}}
{{- if kindIs "string" . -}}
{{- . -}}
{{- else -}}
{{- mustToJson . -}}
{{- end -}}
{{- end -}}

{{/*
healthPort (ours), checked: the port of /healthz, /last-poll and /metrics.
*/}}
{{- define "cluster-proportional-autoscaler.healthPort" -}}
{{- $port := .Values.healthPort | default 8080 | int -}}
{{- if or (lt $port 1) (gt $port 65535) -}}
{{- fail (printf "healthPort: %v is not a port; give 1-65535 (8080 is upstream's)" .Values.healthPort) -}}
{{- end -}}
{{- $port -}}
{{- end -}}

{{/*
logFormat (ours), checked: "json", or nothing for the default text (logfmt).
*/}}
{{- define "cluster-proportional-autoscaler.logFormat" -}}
{{- $format := .Values.logFormat | default "text" | toString -}}
{{- if not (has $format (list "text" "json")) -}}
{{- fail (printf "logFormat: %q is not a log format; give text or json" $format) -}}
{{- end -}}
{{- if eq $format "json" -}}json{{- end -}}
{{- end -}}

{{/*
More than one replica needs leader election: without it every replica polls and writes the
same targets, and the replicas undo each other's writes.
*/}}
{{- define "cluster-proportional-autoscaler.checkReplicas" -}}
{{- $replicas := .Values.replicaCount | int -}}
{{- if and (gt $replicas 1) (not ((.Values.options.leaderElection | default dict).enabled)) -}}
{{- fail (printf "replicaCount is %d but options.leaderElection.enabled is false: every replica would poll and write the same targets, each undoing the others' writes (the daemon logs that as scale.overwritten). Set options.leaderElection.enabled=true to run %d replicas with one writer, or set replicaCount=1" $replicas $replicas) -}}
{{- end -}}
{{- end -}}
