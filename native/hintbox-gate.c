/*
 * hintbox-gate: the first program of every hintbox sandbox.
 *
 *   HINTBOX_GATE_SOCKET=/run/hintbox/io/NAME.sock HINTBOX_GATE_TOKEN=HEX \
 *   GLIBC_TUNABLES= HINTBOX_GATE_TUNABLES=[=VALUE] hintbox-gate PROGRAM [ARG...]
 *
 * It connects to the Unix socket hintbox listens on (bound into the container read-only),
 * sends the token (hintbox takes no other connection as the gate's), waits for hintbox to
 * release it (one byte, 'G'), makes that connection the server's stdin and stdout, and
 * executes the server. Until the release nothing of the image runs; if hintbox closes the
 * connection instead, the gate exits and the server never starts.
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

/* Writes all of buf, across short writes and interruptions. */
static int write_all(int fd, const char *buf, size_t len) {
  while (len > 0) {
    ssize_t n = write(fd, buf, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    buf += n;
    len -= (size_t)n;
  }
  return 0;
}

/*
 * GLIBC_TUNABLES is set empty for the gate itself (its static libc reads it at start-up: the
 * image's ENV may not tune it). The server gets the profile's own value, which hintbox passes
 * as HINTBOX_GATE_TUNABLES="=VALUE", or no GLIBC_TUNABLES at all when that is empty.
 */
static int restore_tunables(void) {
  const char *saved = getenv("HINTBOX_GATE_TUNABLES");
  int rc = saved != NULL && saved[0] == '=' ? setenv("GLIBC_TUNABLES", saved + 1, 1) : unsetenv("GLIBC_TUNABLES");
  return rc != 0 ? rc : unsetenv("HINTBOX_GATE_TUNABLES");
}

int main(int argc, char **argv) {
  const char *path = getenv("HINTBOX_GATE_SOCKET");
  const char *token = getenv("HINTBOX_GATE_TOKEN");
  if (path == NULL || token == NULL || argc < 2) {
    say("usage", "HINTBOX_GATE_SOCKET=PATH HINTBOX_GATE_TOKEN=HEX hintbox-gate PROGRAM [ARG...]");
    return GATE_FAILED;
  }
  /*
   * "-": the channel is the gate's own stdin and stdout (on Kubernetes, the API's attach to the
   * Pod: no host folder to bind a socket from). The token then only says the gate is up.
   */
  int stdio = strcmp(path, "-") == 0;
  int fd = STDIN_FILENO, out = STDOUT_FILENO;
  if (!stdio) {
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof addr.sun_path) {
      say("socket path too long", path);
      return GATE_FAILED;
    }
    strcpy(addr.sun_path, path);
    /* Not close-on-exec: the descriptor becomes the server's stdin and stdout. */
    fd = socket(AF_UNIX, SOCK_STREAM, 0);
    int rc;
    do rc = fd < 0 ? -1 : connect(fd, (struct sockaddr *)&addr, sizeof addr);
    while (rc != 0 && errno == EINTR);
    if (rc != 0) {
      say("cannot connect to hintbox", strerror(errno));
      return GATE_FAILED;
    }
    out = fd;
  }
  if (write_all(out, token, strlen(token)) != 0 || write_all(out, "\n", 1) != 0) {
    say("cannot send the token to hintbox", strerror(errno));
    return GATE_FAILED;
  }
  /* hintbox's, not the server's: it does not inherit them. */
  unsetenv("HINTBOX_GATE_SOCKET");
  unsetenv("HINTBOX_GATE_TOKEN");
  if (restore_tunables() != 0) {
    say("cannot restore GLIBC_TUNABLES", strerror(errno));
    return GATE_FAILED;
  }

  char release = 0;
  ssize_t n;
  do n = read(fd, &release, 1);
  while (n < 0 && errno == EINTR);
  if (n != 1 || release != 'G') return GATE_FAILED; /* not released: the server never runs */

  if (!stdio && ((fd != STDIN_FILENO && dup2(fd, STDIN_FILENO) < 0) || (fd != STDOUT_FILENO && dup2(fd, STDOUT_FILENO) < 0))) {
    say("cannot hand the connection to the server", strerror(errno));
    return GATE_FAILED;
  }
  if (fd > STDERR_FILENO) close(fd);
  execvp(argv[1], argv + 1);
  say("cannot run the server", strerror(errno));
  say("command", argv[1]);
  return EXEC_FAILED;
}
