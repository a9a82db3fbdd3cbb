// The run form's code_tests row links to the code_tests bench on the dataset version the form has chosen.

const link = document.getElementById("code-tests-bench-link");
const picker = document.getElementById("id_dataset_version");
if (link && picker) {
  const follow = () => {
    link.href = picker.value ? `${link.dataset.bench}?version=${encodeURIComponent(picker.value)}` : link.dataset.bench;
  };
  picker.addEventListener("change", follow);
  follow();
}
