// Command standin is the only program in the two images `make cluster-e2e` builds locally,
// because no image registry is reachable here:
//
//	standin pause   the pod sandbox image: sleeps until SIGTERM/SIGINT, then exits 0
//	standin serve   the CoreDNS stand-in: answers GET /health on :8080 and /ready on :8181
//	                (CoreDNS's own probe ports and paths) with 200, exits 0 on SIGTERM
//
// It exits at once on SIGTERM, so deleting a pod does not wait for the grace period (a
// process that is PID 1 in its container gets no default signal handlers).
package main

import (
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: standin pause|serve")
		os.Exit(2)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	switch os.Args[1] {
	case "pause":
	case "serve":
		for addr, path := range map[string]string{":8080": "/health", ":8181": "/ready"} {
			mux := http.NewServeMux()
			mux.HandleFunc(path, func(w http.ResponseWriter, _ *http.Request) {
				fmt.Fprintln(w, "OK")
			})
			go func() {
				if err := http.ListenAndServe(addr, mux); err != nil {
					fmt.Fprintln(os.Stderr, "standin:", err)
					os.Exit(1)
				}
			}()
		}
		fmt.Println("standin: serving /health on :8080 and /ready on :8181")
	default:
		fmt.Fprintf(os.Stderr, "standin: unknown mode %q\n", os.Args[1])
		os.Exit(2)
	}
	sig := <-stop
	fmt.Printf("standin: %s, exiting\n", sig)
}
