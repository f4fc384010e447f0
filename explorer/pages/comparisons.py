import streamlit as st

st.title("Comparisons")
st.info("Coming soon.")
