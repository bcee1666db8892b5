// OpenSSL 3's libcrypto (<openssl/evp.h>, <openssl/err.h>, <openssl/crypto.h>) for Swift, headers only: the
// LibCrypto module loads libcrypto.so.3 with dlopen the first time an advertisement is decrypted, so a daemon without
// keys never maps it (no `link` in the module map, no pkgConfig: either would make the binary depend on it). What the
// importer cannot take as it is, and the function types the module finds with dlsym, carry a `clibcrypto_` prefix.
#ifndef CLIBCRYPTO_SHIM_H
#define CLIBCRYPTO_SHIM_H

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>

// The EVP_CIPHER_CTX_ctrl commands for CCM. <openssl/evp.h> defines the CCM names as aliases of the AEAD ones,
// macros of macros, which Swift does not import; the values are fixed by OpenSSL's ABI.
static const int clibcrypto_ctrl_ccm_set_ivlen = EVP_CTRL_CCM_SET_IVLEN;
static const int clibcrypto_ctrl_ccm_set_tag = EVP_CTRL_CCM_SET_TAG;
static const int clibcrypto_ctrl_ccm_get_tag = EVP_CTRL_CCM_GET_TAG;

// The types of the functions the LibCrypto module finds with dlsym (Sources/LibCrypto/LibCrypto.swift).
// `__typeof__` takes each type from the declaration in the header, so a signature cannot drift from it; naming a
// function here does not reference its symbol.
#define CLIBCRYPTO_FUNCTION_TYPE(name) typedef __typeof__(&name) clibcrypto_##name##_t
CLIBCRYPTO_FUNCTION_TYPE(OpenSSL_version);
CLIBCRYPTO_FUNCTION_TYPE(EVP_CIPHER_fetch);
CLIBCRYPTO_FUNCTION_TYPE(EVP_CIPHER_CTX_new);
CLIBCRYPTO_FUNCTION_TYPE(EVP_CIPHER_CTX_free);
CLIBCRYPTO_FUNCTION_TYPE(EVP_CIPHER_CTX_ctrl);
CLIBCRYPTO_FUNCTION_TYPE(EVP_DecryptInit_ex);
CLIBCRYPTO_FUNCTION_TYPE(EVP_DecryptUpdate);
CLIBCRYPTO_FUNCTION_TYPE(EVP_EncryptInit_ex);
CLIBCRYPTO_FUNCTION_TYPE(EVP_EncryptUpdate);
CLIBCRYPTO_FUNCTION_TYPE(EVP_EncryptFinal_ex);
CLIBCRYPTO_FUNCTION_TYPE(ERR_clear_error);
#undef CLIBCRYPTO_FUNCTION_TYPE

#endif
