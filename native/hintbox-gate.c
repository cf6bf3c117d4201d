/*
 * hintbox-gate: the first program of every hintbox sandbox.
 *
 *   HINTBOX_GATE_SOCKET=/run/hintbox/io/NAME.sock hintbox-gate PROGRAM [ARG...]
 *
 * It connects to the Unix socket hintbox listens on (bound into the container read-only),
 * waits for hintbox to release it (one byte, 'G'), makes that connection the server's stdin
 * and stdout, and executes the server. Until the release nothing of the image runs; if hintbox
 * closes the connection instead, the gate exits and the server never starts.
 *
 * Why a static binary of hintbox's own, bound in from the host: the image is untrusted. Its
 * /bin/sh, its dynamic loader and its libc are the image's to replace, so a gate built on any
 * of them could be skipped. This file is linked statically (no PT_INTERP; hintbox checks) and
 * uses nothing from the container's file system before exec.
 *
 * Why a socket rather than the container's stdio: MCP messages then go straight between the
 * server and hintbox, instead of through containerd's shim, FIFOs and dockerd's attach stream.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

enum { GATE_FAILED = 111, EXEC_FAILED = 127 };

static void say(const char *what, const char *detail) {
  const char *parts[] = {"hintbox-gate: ", what, detail ? ": " : "", detail ? detail : "", "\n"};
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
    ssize_t ignored = write(2, parts[i], strlen(parts[i]));
    (void)ignored;
  }
}

int main(int argc, char **argv) {
  const char *path = getenv("HINTBOX_GATE_SOCKET");
  if (path == NULL || argc < 2) {
    say("usage", "HINTBOX_GATE_SOCKET=PATH hintbox-gate PROGRAM [ARG...]");
    return GATE_FAILED;
  }
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  if (strlen(path) >= sizeof addr.sun_path) {
    say("socket path too long", path);
    return GATE_FAILED;
  }
  strcpy(addr.sun_path, path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
    say("cannot connect to hintbox", strerror(errno));
    return GATE_FAILED;
  }
  /* The socket's name is hintbox's secret: the server does not inherit it. */
  unsetenv("HINTBOX_GATE_SOCKET");

  char release = 0;
  ssize_t n;
  do n = read(fd, &release, 1);
  while (n < 0 && errno == EINTR);
  if (n != 1 || release != 'G') return GATE_FAILED; /* not released: the server never runs */

  /* dup2 clears close-on-exec on the copies; the original closes at exec. */
  if (dup2(fd, STDIN_FILENO) < 0 || dup2(fd, STDOUT_FILENO) < 0) {
    say("cannot hand the connection to the server", strerror(errno));
    return GATE_FAILED;
  }
  execvp(argv[1], argv + 1);
  say("cannot run the server", strerror(errno));
  say("command", argv[1]);
  return EXEC_FAILED;
}
