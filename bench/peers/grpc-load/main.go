// peers-grpc-load drives Mandate's gRPC SubmitIntent with ghz (as a library, built from the Go
// module proxy) for `npm run bench:peers`. The ghz command line sends one fixed body and
// metadata, which Mandate refuses as a replay after the first call: every Intent needs its own
// nonce and signature. Here request n sends line n of a file of pre-signed Intents.
//
//	peers-grpc-load -host 127.0.0.1:PORT -intents FILE -c 32 -duration 10s [-rps N] [-deadline 20s]
//
// Each line of FILE is "key id <TAB> signature <TAB> intent JSON". Prints ghz's report as
// JSON on stdout; a request past the end of the file is an error, never a replay.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/bojand/ghz/runner"
	"github.com/jhump/protoreflect/desc"
	"google.golang.org/grpc/metadata"
)

type signedIntent struct {
	message []byte // SubmitIntentRequest{intent = 1: the signed bytes}, encoded
	md      metadata.MD
}

func main() {
	host := flag.String("host", "", "host:port of the service (h2c)")
	file := flag.String("intents", "", "file of pre-signed Intents, one per line")
	concurrency := flag.Uint("c", 32, "concurrent calls")
	connections := flag.Uint("connections", 1, "HTTP/2 connections")
	duration := flag.Duration("duration", 10*time.Second, "how long to run")
	rps := flag.Uint("rps", 0, "calls per second (0: as fast as the service answers)")
	// No deadline by default, as bench/intents.ts's client: a call with a grpc-timeout header
	// takes the service's general gRPC path (connect-node) instead of its unary fast path.
	deadline := flag.Duration("deadline", 0, "per-call deadline sent as grpc-timeout (0: none)")
	flag.Parse()
	if *host == "" || *file == "" {
		fail("usage: peers-grpc-load -host HOST:PORT -intents FILE [-c 32] [-duration 10s] [-rps N]")
	}
	intents, err := readIntents(*file)
	if err != nil {
		fail(err.Error())
	}
	options := []runner.Option{
		runner.WithInsecure(true),
		runner.WithConcurrency(*concurrency),
		runner.WithConnections(*connections),
		runner.WithRunDuration(*duration),
		// Calls in flight when the time is up finish and count, as wrk's do.
		runner.WithDurationStopAction("wait"),
		runner.WithRPS(*rps),
		runner.WithTimeout(*deadline),
		runner.WithBinaryDataFunc(func(_ *desc.MethodDescriptor, cd *runner.CallData) []byte {
			if cd.RequestNumber >= int64(len(intents)) {
				return nil // an empty SubmitIntentRequest: refused (invalid_argument), counted as an error
			}
			return intents[cd.RequestNumber].message
		}),
		runner.WithMetadataProvider(func(cd *runner.CallData) (*metadata.MD, error) {
			if cd.RequestNumber >= int64(len(intents)) {
				return &metadata.MD{}, nil
			}
			return &intents[cd.RequestNumber].md, nil
		}),
	}
	report, err := runner.Run("mandate.v1.IntentService/SubmitIntent", *host, options...)
	if err != nil {
		fail(err.Error())
	}
	out, err := json.Marshal(report)
	if err != nil {
		fail(err.Error())
	}
	fmt.Println(string(out))
}

func readIntents(path string) ([]signedIntent, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var intents []signedIntent
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	for line := 1; scanner.Scan(); line++ {
		parts := strings.SplitN(scanner.Text(), "\t", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("%s:%d: expected key id, signature and intent separated by tabs", path, line)
		}
		intents = append(intents, signedIntent{
			message: bytesField(1, []byte(parts[2])),
			md:      metadata.Pairs("x-service-key-id", parts[0], "x-service-signature", parts[1]),
		})
	}
	return intents, scanner.Err()
}

// bytesField encodes one length-delimited protobuf field.
func bytesField(field int, value []byte) []byte {
	out := []byte{byte(field<<3 | 2)}
	for n := len(value); ; n >>= 7 {
		if n < 0x80 {
			out = append(out, byte(n))
			break
		}
		out = append(out, byte(n&0x7f|0x80))
	}
	return append(out, value...)
}

func fail(message string) {
	fmt.Fprintln(os.Stderr, "peers-grpc-load:", message)
	os.Exit(2)
}
