#error <img src=x onerror=alert('compiler')>
