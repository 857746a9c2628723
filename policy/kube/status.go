package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"
)

// What reef writes to the API: one condition on each ClusterNetworkPolicy's
// status, saying whether reef enforces it as written. What it says depends
// on the policy's spec only, so every node computes the same; a node
// writes it (server-side apply, field manager reef, on the status
// subresource) only when the informer's copy says otherwise, so a change
// of a policy is written once by each node that sees it first, and not
// again.

// ConditionEnforced is the condition's type.
const ConditionEnforced = "reef.cni/Enforced"

// Reasons of the condition.
const (
	ReasonEnforced          = "Enforced"          // status True: as written
	ReasonPartiallyEnforced = "PartiallyEnforced" // False: some parts not, the message says which and what reef does instead
	ReasonNotEnforced       = "NotEnforced"       // False: the whole policy is skipped, the message says why
)

// fieldManager is reef's name in the objects' managedFields.
const fieldManager = "reef"

// Condition is what reef says of one ClusterNetworkPolicy.
type Condition struct {
	Status  metav1.ConditionStatus
	Reason  string
	Message string
	// Generation is the policy's metadata.generation it was compiled
	// from: the condition's observedGeneration.
	Generation int64
}

// maxMessage bounds a condition's message (the API's limit is 32768).
const maxMessage = 4096

// SetClusterConditions hands the status writer the conditions to write,
// by policy name; it writes those that differ from the API's, in its own
// goroutine (no API call here).
func (w *Watcher) SetClusterConditions(want map[string]Condition) {
	w.mu.Lock()
	w.conditions = maps.Clone(want)
	w.mu.Unlock()
	select {
	case w.statusPoke <- struct{}{}:
	default:
	}
}

// runStatus writes the conditions until ctx ends.
func (w *Watcher) runStatus(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.statusPoke:
		}
		w.writeConditions(ctx)
	}
}

func (w *Watcher) writeConditions(ctx context.Context) {
	inf, _ := w.clusterInformers()
	if inf == nil {
		return
	}
	w.mu.Lock()
	want := w.conditions
	w.mu.Unlock()
	var errs []string
	for _, name := range slices.Sorted(maps.Keys(want)) {
		c := want[name]
		obj, ok, _ := inf.GetStore().GetByKey(name)
		p, isCNP := obj.(*cnp.ClusterNetworkPolicy)
		if !ok || !isCNP || p.Generation != c.Generation || upToDate(p, c) {
			continue // gone, changed since (a newer sync comes), or written
		}
		if err := w.applyCondition(ctx, name, c); err != nil {
			errs = append(errs, err.Error())
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	last := ""
	if len(errs) > 0 {
		last = fmt.Sprintf("%s (and %d more)", errs[0], len(errs)-1)
		if len(errs) == 1 {
			last = errs[0]
		}
		if w.status.ConditionError == "" {
			w.log.Warn("cannot write ClusterNetworkPolicy status conditions; retrying with the next change", "error", last)
		}
	}
	w.status.ConditionError = last
}

// upToDate reports whether the policy already has the condition, as
// written (its message cut to maxMessage: compared uncut, a long one would
// be written again at every sync).
func upToDate(p *cnp.ClusterNetworkPolicy, c Condition) bool {
	for _, have := range p.Status.Conditions {
		if have.Type == ConditionEnforced {
			return have.Status == c.Status && have.Reason == c.Reason && have.Message == c.message() && have.ObservedGeneration == c.Generation
		}
	}
	return false
}

// message is the condition's message as written: cut to maxMessage.
func (c Condition) message() string {
	if len(c.Message) > maxMessage {
		return c.Message[:maxMessage-3] + "..."
	}
	return c.Message
}

func (w *Watcher) applyCondition(ctx context.Context, name string, c Condition) error {
	msg := c.message()
	body := map[string]any{
		"apiVersion": cnp.SchemeGroupVersion.String(),
		"kind":       "ClusterNetworkPolicy",
		"metadata":   map[string]any{"name": name},
		"status": map[string]any{"conditions": []metav1.Condition{{Type: ConditionEnforced, Status: c.Status, Reason: c.Reason,
			Message: msg, ObservedGeneration: c.Generation, LastTransitionTime: metav1.NewTime(time.Now().Truncate(time.Second))}}},
	}
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, probeEvery)
	defer cancel()
	err = w.cnpClient.Patch(types.ApplyPatchType).Resource(cnpResource).Name(name).SubResource("status").
		Param("fieldManager", fieldManager).Param("force", "true").Body(b).Do(rctx).Error()
	if err != nil {
		return fmt.Errorf("ClusterNetworkPolicy %s: write status condition %s: %w", name, ConditionEnforced, err)
	}
	return nil
}
