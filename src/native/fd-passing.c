/*
 * What Node's net module cannot do for clamd's FILDES command: hand a file descriptor over a unix
 * socket (SCM_RIGHTS), and make the descriptors handed over (an anonymous memory file, an unnamed
 * file on disk). clamd then scans the file itself instead of receiving a stream and writing its
 * own temporary copy first (docs/ARCHITECTURE.md, "clamd by descriptor").
 *
 * Every function returns a descriptor or 0 on success, and a negative errno on failure: the
 * caller decides (it falls back to INSTREAM).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>
#include <node_api.h>

static const char FILDES[] = "zFILDES";

static napi_value number(napi_env env, int value) {
  napi_value result;
  napi_create_int32(env, value, &result);
  return result;
}

static int int_arg(napi_env env, napi_value value, int *out) {
  return napi_get_value_int32(env, value, out) == napi_ok ? 0 : -EINVAL;
}

/* memfd(): an anonymous file in memory, for content already held whole (small items). */
static napi_value Memfd(napi_env env, napi_callback_info info) {
  (void)info;
  int fd = memfd_create("assay-scan", MFD_CLOEXEC);
  return number(env, fd < 0 ? -errno : fd);
}

/* openTemporary(dir): a file in dir without a name (O_TMPFILE): nothing is left behind. */
static napi_value OpenTemporary(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  char dir[4096];
  size_t length = 0;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1 ||
      napi_get_value_string_utf8(env, argv[0], dir, sizeof dir, &length) != napi_ok ||
      length >= sizeof dir - 1) {
    return number(env, -EINVAL);
  }
  int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  return number(env, fd < 0 ? -errno : fd);
}

/*
 * sendFildes(socketFd, fileFd): clamd's `zFILDES` command, then one byte carrying the descriptor
 * (clamd refuses a descriptor sent with the command's own bytes). The socket is non-blocking and
 * must have nothing queued: a short write is reported as -EAGAIN and the session is not reused.
 */
static napi_value SendFildes(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  int socket_fd, file_fd;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 2 ||
      int_arg(env, argv[0], &socket_fd) != 0 || int_arg(env, argv[1], &file_fd) != 0) {
    return number(env, -EINVAL);
  }
  ssize_t sent;
  do {
    sent = send(socket_fd, FILDES, sizeof FILDES, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  if (sent < 0) return number(env, -errno);
  if ((size_t)sent != sizeof FILDES) return number(env, -EAGAIN);

  char byte = 0;
  struct iovec iov = {.iov_base = &byte, .iov_len = 1};
  union {
    char buffer[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } control;
  memset(&control, 0, sizeof control);
  struct msghdr message = {0};
  message.msg_iov = &iov;
  message.msg_iovlen = 1;
  message.msg_control = control.buffer;
  message.msg_controllen = sizeof control.buffer;
  struct cmsghdr *header = CMSG_FIRSTHDR(&message);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(header), &file_fd, sizeof(int));
  do {
    sent = sendmsg(socket_fd, &message, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  if (sent < 0) return number(env, errno == EAGAIN ? -EAGAIN : -errno);
  return number(env, sent == 1 ? 0 : -EAGAIN);
}

static napi_value Init(napi_env env, napi_value exports) {
  napi_property_descriptor properties[] = {
      {"memfd", NULL, Memfd, NULL, NULL, NULL, napi_enumerable, NULL},
      {"openTemporary", NULL, OpenTemporary, NULL, NULL, NULL, napi_enumerable, NULL},
      {"sendFildes", NULL, SendFildes, NULL, NULL, NULL, napi_enumerable, NULL},
  };
  napi_define_properties(env, exports, sizeof properties / sizeof properties[0], properties);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
