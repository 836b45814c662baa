// Package deploy holds no code: its tests check what deploy/ ships
// (Prometheus rules, the Grafana dashboard, Kubernetes manifests, systemd
// units) against the Kubernetes API types, the rune binary's flags and
// docs/operations.md. It is a module of its own so that the Kubernetes API
// types stay out of Rune's dependencies.
package deploy
