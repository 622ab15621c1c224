/* stop.c - the handlers of the stop signals (contract in stop.h). */
#include "stop.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const int stop_signals[] = {SIGINT, SIGTERM, SIGUSR1};
#define N_STOP (int)(sizeof stop_signals / sizeof stop_signals[0])

static const char *const acks[] = {
    ("\nvitrain: SIGINT: stopping after the current step or evaluation batch with a checkpoint "
     "(a second SIGINT exits at once without one)\n"),
    "\nvitrain: SIGTERM: stopping after the current step or evaluation batch with a checkpoint\n",
    "\nvitrain: SIGUSR1: stopping after the current step or evaluation batch with a checkpoint\n"};

static volatile sig_atomic_t requested; /* the first stop signal, 0: none */
static int announce;

/* Async-signal-safe: only sig_atomic_t stores, write(2) and _exit. */
static void on_signal(int sig) {
    if (requested && sig == SIGINT) {
        static const char msg[] = "\nvitrain: second SIGINT: exiting at once without writing a "
                                  "checkpoint (the last complete one is kept)\n";
        ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
        (void)w;
        _exit(128 + SIGINT);
    }
    if (requested) return;
    requested = sig;
    for (int i = 0; i < N_STOP && announce; i++)
        if (stop_signals[i] == sig) {
            ssize_t w = write(STDERR_FILENO, acks[i], strlen(acks[i]));
            (void)w;
        }
}

void vt_stop_install(int announce_signals) {
    requested = 0;
    announce = announce_signals;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigset_t set;
    sigemptyset(&set);
    for (int i = 0; i < N_STOP; i++) {
        sigaction(stop_signals[i], &sa, NULL);
        sigaddset(&set, stop_signals[i]);
    }
    pthread_sigmask(SIG_UNBLOCK, &set, NULL); /* a mask inherited through exec may block them */
}

int vt_stop_signal(void) { return requested; }

const char *vt_stop_signal_name(int sig) {
    static char buf[32];
    switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    default: snprintf(buf, sizeof buf, "signal %d", sig); return buf;
    }
}
