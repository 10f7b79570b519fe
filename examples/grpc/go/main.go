// Mandate over plain gRPC from Go, with stubs generated from proto/ alone.
//
// No Mandate client library: google.golang.org/grpc, the stubs `buf generate` makes from
// proto/mandate (see buf.gen.yaml), and crypto/ed25519 for the agent's key. Run against a
// service (gRPC is served on its one port, h2c):
//
//	buf generate ../../../proto --path ../../../proto/mandate
//	MANDATE_BASE_URL=http://127.0.0.1:8080 go run .
//
// It creates a sandbox organization, registers and activates an agent, submits a signed
// Intent (the exact JSON bytes in SubmitIntentRequest.intent; the certificate id and the
// signature in x-service-key-id / x-service-signature metadata), resubmits the same bytes
// (the same decision: the nonce is an idempotency key), and shows that a tampered Intent
// fails with UNAUTHENTICATED and a mandate.v1.ErrorDetail. Prints one JSON object.
package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	mandatev1 "github.com/mandate-dev/mandate/gen/go/mandate/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	base, err := url.Parse(envOr("MANDATE_BASE_URL", "http://127.0.0.1:8080"))
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(base.Host, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := map[string]any{}

	sandbox, err := mandatev1.NewSandboxServiceClient(conn).CreateSandboxOrganization(ctx,
		&mandatev1.CreateSandboxOrganizationRequest{Email: "grpc-go-" + randomHex(5) + "@example.com"})
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	admin := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+sandbox.GetApiKey())
	principal, err := mandatev1.NewPrincipalServiceClient(conn).CreatePrincipal(admin,
		&mandatev1.CreatePrincipalRequest{DisplayName: "Accounts Payable", Kind: mandatev1.PrincipalKind_PRINCIPAL_KIND_ROLE})
	if err != nil {
		return fmt.Errorf("principal: %w", err)
	}

	// The agent's private key never leaves this process; only the public key is registered.
	public, private, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	agents := mandatev1.NewAgentServiceClient(conn)
	agent, err := agents.RegisterAgent(admin, &mandatev1.RegisterAgentRequest{
		Name:                 "grpc-go-agent",
		ActingForPrincipalId: principal.GetPrincipalId(),
		PublicKey:            "ed25519:base64:" + base64.StdEncoding.EncodeToString(public),
	})
	if err != nil {
		return fmt.Errorf("register: %w", err)
	}
	if agent, err = agents.ActivateAgent(admin, &mandatev1.TransitionAgentRequest{AgentId: agent.GetAgentId()}); err != nil {
		return fmt.Errorf("activate: %w", err)
	}
	out["agent_state"] = agent.GetState().String()

	// What is signed is the exact JSON Intent document; the service verifies, evaluates and
	// records those bytes, so they travel untouched in a bytes field.
	intent, err := json.Marshal(map[string]any{
		"agent_id":     agent.GetAgentId(),
		"action":       "reference_noop",
		"amount":       42,
		"currency":     "USD",
		"requested_at": time.Now().UTC().Format("2006-01-02T15:04:05.000Z"),
		"nonce":        uuidV4(),
	})
	if err != nil {
		return err
	}
	signed := metadata.AppendToOutgoingContext(ctx,
		"x-service-key-id", agent.GetCertificateId(),
		"x-service-signature", base64.StdEncoding.EncodeToString(ed25519.Sign(private, intent)))
	intents := mandatev1.NewIntentServiceClient(conn)
	decision, err := intents.SubmitIntent(signed, &mandatev1.SubmitIntentRequest{Intent: intent})
	if err != nil {
		return fmt.Errorf("submit: %w %v", err, describe(err))
	}
	out["outcome"] = decision.GetOutcome().String()
	out["reason"] = decision.GetReason()
	out["decision_id"] = decision.GetDecisionId()
	out["evidence_id"] = decision.GetEvidenceId()

	again, err := intents.SubmitIntent(signed, &mandatev1.SubmitIntentRequest{Intent: intent})
	if err != nil {
		return fmt.Errorf("resubmit: %w", err)
	}
	out["resubmitted_decision_id"] = again.GetDecisionId()

	// Other bytes under the same signature: refused before anything is recorded.
	tampered := []byte(strings.Replace(string(intent), "reference_noop", "reference_nop!", 1))
	_, err = intents.SubmitIntent(signed, &mandatev1.SubmitIntentRequest{Intent: tampered})
	out["tampered"] = codeAndDetail(err)

	return json.NewEncoder(os.Stdout).Encode(out)
}

// codeAndDetail is the gRPC code of a failed call and the `detail` of the mandate.v1.ErrorDetail
// in its status details (grpc-status-details-bin).
func codeAndDetail(err error) []string {
	if err == nil {
		return []string{"OK", ""}
	}
	st := status.Convert(err)
	detail := ""
	for _, d := range st.Details() {
		if e, ok := d.(*mandatev1.ErrorDetail); ok {
			detail = e.GetDetail()
		}
	}
	return []string{st.Code().String(), detail}
}

// describe is the mandate.v1.ErrorDetail of a failed call, field errors included, as JSON.
func describe(err error) string {
	for _, d := range status.Convert(err).Details() {
		if e, ok := d.(*mandatev1.ErrorDetail); ok {
			if b, jerr := protojson.Marshal(e); jerr == nil {
				return string(b)
			}
		}
	}
	return ""
}

// uuidV4 is a random (version 4) UUID, the nonce's format.
func uuidV4() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
