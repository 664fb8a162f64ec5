// libingot.so exports exactly what the public headers declare: the library is compiled with
// -fvisibility=hidden, and each public header wraps its declarations in INGOT_API_BEGIN/END.
#pragma once

#if defined(__GNUC__) && !defined(__CUDA_ARCH__)
#define INGOT_API_BEGIN _Pragma("GCC visibility push(default)")
#define INGOT_API_END _Pragma("GCC visibility pop")
#else
#define INGOT_API_BEGIN
#define INGOT_API_END
#endif
