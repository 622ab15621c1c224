/* stop.h - a stop requested by a signal: SIGINT, SIGTERM and SIGUSR1 ask the training
 * loop to stop at the next optimizer-step boundary or evaluation batch (train.c writes a
 * checkpoint pair there and the program exits with VT_EXIT_STOPPED).
 *
 * Owns: the handlers of these three signals (from the start of training on) and the
 * request they record. Does not own where the request is acted on (train.c checks it
 * between steps and agrees on it across ranks through dist.h) or the exit code (main.c).
 *
 * The handlers are installed explicitly, whatever this process inherited: a signal
 * inherited as ignored (a job started with `&` from a non-interactive shell ignores
 * SIGINT) or blocked (the signal mask survives exec) is handled too; the calling thread
 * (main's, the one that trains) unblocks them. A handler records the first signal (and
 * acknowledges it, see vt_stop_install); later SIGTERM and SIGUSR1 change nothing. A
 * SIGINT after a stop was requested ends the process at once (exit status 130,
 * 128 + SIGINT) without writing anything more: the run directory keeps its last complete
 * pair (checkpoint.h). SA_RESTART: a system call the signal interrupts (a read of the
 * loader threads, a write of a checkpoint) is restarted, not failed with EINTR.
 */
#ifndef VT_STOP_H
#define VT_STOP_H

/* The exit status of a run a signal stopped after writing its checkpoint pair: sysexits.h's
 * EX_TEMPFAIL ("try again later"), distinct from 0 (done), 1 (runtime failure), 2 (usage
 * or config error) and 128 + N (killed by signal N). */
#define VT_EXIT_STOPPED 75

/* Install the handlers and clear any earlier request. They stay for the rest of the
 * process: a signal after the final evaluations is recorded and changes nothing, so a run
 * that finished exits 0 rather than dying on the signal.
 * announce_signals: the first signal is acknowledged on stderr at once ("stopping after
 * the current step"), so a user at a terminal sees it was received (rank 0 announces). */
void vt_stop_install(int announce_signals);
/* The signal number of the first stop request since vt_stop_install, or 0. */
int vt_stop_signal(void);
/* "SIGINT", "SIGTERM", "SIGUSR1" or "signal N". */
const char *vt_stop_signal_name(int sig);

#endif
