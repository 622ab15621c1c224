/* test_stop.c - the stop-signal handlers (stop.h) in-process: the first signal is
 * recorded and later SIGTERM/SIGUSR1 do not replace it; install clears an earlier
 * request; an ignored or blocked signal is handled once installed; a second SIGINT ends
 * the process at once with 130 (run in a forked child); the names. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "stop.h"

/* Exit status of a forked child running fn (128 + N if signal N ended it). */
static int in_child(void (*fn)(void)) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        fn();
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void two_sigints(void) {
    vt_stop_install(0);
    raise(SIGINT);
    if (vt_stop_signal() != SIGINT) _exit(3);
    raise(SIGINT);
    _exit(4); /* not reached: the second SIGINT exits */
}

static void term_then_int(void) {
    vt_stop_install(0);
    raise(SIGTERM);
    raise(SIGINT); /* a stop is requested: a SIGINT now exits at once */
    _exit(4);
}

static void ignored_then_installed(void) {
    signal(SIGUSR1, SIG_IGN);
    vt_stop_install(0);
    raise(SIGUSR1);
    _exit(vt_stop_signal() == SIGUSR1 ? 0 : 5);
}

static void blocked_then_installed(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigprocmask(SIG_BLOCK, &set, NULL);
    vt_stop_install(0);
    raise(SIGTERM);
    _exit(vt_stop_signal() == SIGTERM ? 0 : 5);
}

int main(void) {
    vt_stop_install(0);
    CHECK(vt_stop_signal() == 0, "no request after install");
    raise(SIGTERM);
    CHECK(vt_stop_signal() == SIGTERM, "SIGTERM recorded (got %d)", vt_stop_signal());
    raise(SIGUSR1);
    CHECK(vt_stop_signal() == SIGTERM, "a later SIGUSR1 keeps the first request (got %d)", vt_stop_signal());
    vt_stop_install(0);
    CHECK(vt_stop_signal() == 0, "install clears an earlier request");
    raise(SIGUSR1);
    CHECK(vt_stop_signal() == SIGUSR1, "SIGUSR1 recorded");

    int rc = in_child(two_sigints);
    CHECK(rc == 128 + SIGINT, "a second SIGINT exits at once with 130 (got %d)", rc);
    rc = in_child(term_then_int);
    CHECK(rc == 128 + SIGINT, "a SIGINT after a SIGTERM stop exits at once with 130 (got %d)", rc);
    rc = in_child(ignored_then_installed);
    CHECK(rc == 0, "an ignored SIGUSR1 is handled once installed (got %d)", rc);
    rc = in_child(blocked_then_installed);
    CHECK(rc == 0, "a blocked SIGTERM is handled once installed (got %d)", rc);

    CHECK(!strcmp(vt_stop_signal_name(SIGINT), "SIGINT") && !strcmp(vt_stop_signal_name(SIGTERM), "SIGTERM") &&
          !strcmp(vt_stop_signal_name(SIGUSR1), "SIGUSR1"), "signal names");
    return test_summary();
}
