// Package appplan is the pure side of Applications (api.Application): the override
// layers a chart's values are merged from and the origin of every merged key, the
// system overrides and Kubernetes objects generated from the site's state (the role
// StarlingX's sysinv Helm plugins play), the names of the generated secrets, and
// what a chart group's gates still wait for.
//
// Everything here is a function of its arguments: the leader coordinator's Helm
// runner, the FSM and the CLI (`app overrides show`) reach the same answer from the
// same state. It never does I/O and never links Helm, client-go or the replicated
// state (TestAppplanLinksNoHelm keeps it so). Keys and passwords never appear in
// what it returns: generated Secrets carry the names of Plinth secrets
// (Object.SecretData), which the leader opens when it creates them.
package appplan
