/* A tiny NVTX client library for the recorder tests: one more NVTX client in the process,
 * exercising the C API's ASCII, wide, registered-string, domain and naming calls. */
#define _GNU_SOURCE
#include <nvtx3/nvToolsExt.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

static nvtxEventAttributes_t attributes(void)
{
    nvtxEventAttributes_t a = {0};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    return a;
}

/* Returns 1 when creating a domain / registering a string twice gave the same handle. */
int client_run(void)
{
    nvtxDomainHandle_t d, again;
    nvtxStringHandle_t s, s_again;
    nvtxEventAttributes_t a, b;

    nvtxNameOsThreadA((uint32_t)syscall(SYS_gettid), "c-main");
    nvtxNameCategoryA(3, "c-cat");

    nvtxRangePushA("c-push-a");
    nvtxRangePushW(L"c-push-w \u00e9\u2713");
    nvtxMarkA("c-mark");
    nvtxRangePop();
    nvtxRangePop();

    d = nvtxDomainCreateA("c-domain");
    again = nvtxDomainCreateA("c-domain");
    s = nvtxDomainRegisterStringA(d, "c-registered");
    s_again = nvtxDomainRegisterStringA(d, "c-registered");
    nvtxDomainNameCategoryA(d, 1, "c-domain-cat");

    a = attributes();
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = s;
    a.category = 1;
    a.colorType = NVTX_COLOR_ARGB;
    a.color = 0xFF112233u;
    a.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT32;
    a.payload.uiValue = 7;
    nvtxDomainRangePushEx(d, &a);
    nvtxDomainRangePop(d);

    b = attributes();
    b.messageType = NVTX_MESSAGE_TYPE_ASCII;
    b.message.ascii = "c-float";
    b.category = 3;
    b.payloadType = NVTX_PAYLOAD_TYPE_FLOAT;
    b.payload.fValue = 1.5f;
    nvtxRangePushEx(&b);
    nvtxRangePop();

    b = attributes();
    b.messageType = NVTX_MESSAGE_TYPE_UNICODE;
    b.message.unicode = L"c-wide-ex";
    b.payloadType = NVTX_PAYLOAD_TYPE_INT32;
    b.payload.iValue = -4;
    nvtxMarkEx(&b);

    return d == again && s == s_again;
}
