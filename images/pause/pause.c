/*
 * The pod sandbox's process: it holds the pod's namespaces open and does nothing else.
 * As PID 1 of the pod (when containers share its PID namespace) it reaps zombies, and
 * it exits at once on SIGTERM or SIGINT so that a pod stops without waiting for SIGKILL.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int signo) {
    (void)signo;
    _exit(0);
}

static void on_child(int signo) {
    (void)signo;
    int saved = errno;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
    errno = saved;
}

static void handle(int signo, void (*handler)(int)) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = handler;
    action.sa_flags = SA_RESTART | (signo == SIGCHLD ? SA_NOCLDSTOP : 0);
    if (sigaction(signo, &action, NULL) < 0) {
        perror("pause: sigaction");
        exit(1);
    }
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "-v") == 0) {
        puts("kubelab pause 3.9");
        return 0;
    }
    if (getpid() != 1) {
        fputs("pause: warning: not PID 1, zombies of other processes are not reaped\n", stderr);
    }
    handle(SIGINT, on_stop);
    handle(SIGTERM, on_stop);
    handle(SIGCHLD, on_child);
    for (;;) {
        pause();
    }
}
